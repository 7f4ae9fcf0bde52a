#!/usr/bin/env bash
# A one-node Slurm cluster on localhost for dagflow's tests and benchmarks (Debian's slurm-wlm + munge).
#
#   scripts/slurm-cluster.sh up      start munged, slurmctld and slurmd; wait until the node is idle
#   scripts/slurm-cluster.sh down    cancel every job, stop exactly the daemons `up` started
#   scripts/slurm-cluster.sh status  exit 0 when the cluster is up and answering
#   scripts/slurm-cluster.sh env     print `export SLURM_CONF=...` for the client commands
#
# Everything lives in $DAGFLOW_SLURM_DIR (default /tmp/dagflow-slurm): configuration, munge key and
# socket, spool, state, logs and the daemons' PIDs (pids/*.pid). `up` is idempotent: when the daemons
# it recorded are alive and the node answers it does nothing, so CI and the test fixture can both call it.
# Clients find the cluster through SLURM_CONF=$DAGFLOW_SLURM_DIR/slurm.conf; nothing under /etc is touched.
#
# No systemd and no cgroups here: proctrack/linuxproc, task/none, jobacct_gather/none. Fake GPUs are
# GRES on character devices made with mknod (Slurm refuses regular files), with AutoDetect=off.
# Tunables: DAGFLOW_SLURM_CPUS (CPUs the node advertises, default 8: tests want a few nodes at once even
# on a 2-core machine; SlurmdParameters=config_overrides lets the node claim more than it has),
# DAGFLOW_SLURM_GPUS (fake GPUs, default 4), DAGFLOW_SLURM_PORT (slurmctld port, default 6817; slurmd
# uses the next one).
set -euo pipefail

STATE=${DAGFLOW_SLURM_DIR:-/tmp/dagflow-slurm}
CPUS=${DAGFLOW_SLURM_CPUS:-8}
GPUS=${DAGFLOW_SLURM_GPUS:-4}
PORT=${DAGFLOW_SLURM_PORT:-6817}
CONF=$STATE/slurm.conf
PIDS=$STATE/pids
NODE=$(hostname -s)
# Env marker on every daemon (and so on every slurmstepd they fork): lets `down` find leftovers of this
# cluster and nothing else.
MARK="DAGFLOW_SLURM_STATE=$STATE"

# shellcheck source=lib/marked-pids.sh
source "$(dirname "$0")/lib/marked-pids.sh"

die() { echo "slurm-cluster: $*" >&2; exit 1; }

need_binaries() {
    local missing=()
    for bin in munged slurmctld slurmd sinfo scontrol; do
        command -v "$bin" >/dev/null 2>&1 || missing+=("$bin")
    done
    [[ ${#missing[@]} -eq 0 ]] || die "not installed: ${missing[*]} (apt-get install -y slurm-wlm munge)"
}

alive() {  # alive NAME: the recorded daemon still runs
    local pid
    pid=$(cat "$PIDS/$1.pid" 2>/dev/null) || return 1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

answering() {
    SLURM_CONF=$CONF timeout 5 sinfo -h -N -o '%t' 2>/dev/null | grep -Eq '^(idle|mix|alloc)'
}

write_config() {
    local mem
    # Advertise most of the memory so memory-limited jobs fit; Slurm checks RealMemory against the machine.
    mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.9}' /proc/meminfo)
    mkdir -p "$STATE"/{spool,state,log,pids,munge,dev}
    chmod 700 "$STATE/munge"
    cat >"$CONF" <<EOF
# Written by scripts/slurm-cluster.sh: a one-node test cluster on localhost.
ClusterName=dagflow
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$STATE/state
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/pids/slurmctld.selfpid
SlurmdPidFile=$STATE/pids/slurmd.selfpid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmdParameters=config_overrides
# A job whose dependency can never be met (a parent failed) is cancelled instead of pending forever.
DependencyParameters=kill_invalid_depend
# Without this each job waits about 3 s for the next scheduling pass.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0,default_queue_depth=10000
MaxArraySize=100001
MaxJobCount=200000
MinJobAge=600
KillWait=5
InactiveLimit=0
GresTypes=gpu
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem Gres=gpu:$GPUS State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
    {
        echo "AutoDetect=off"
        for ((i = 0; i < GPUS; i++)); do
            echo "NodeName=$NODE Name=gpu File=$STATE/dev/fakegpu$i"
        done
    } >"$STATE/gres.conf"
    for ((i = 0; i < GPUS; i++)); do
        # Character devices like /dev/null (1,3): Slurm stats File= and refuses anything else.
        [[ -c $STATE/dev/fakegpu$i ]] || mknod -m 666 "$STATE/dev/fakegpu$i" c 1 3
    done
    if [[ ! -s $STATE/munge/munge.key ]]; then
        dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
        chmod 400 "$STATE/munge/munge.key"
    fi
}

start() {  # start NAME CMD...: run CMD in the foreground of its own session, in the background here
    local name=$1
    shift
    env "$MARK" SLURM_CONF="$CONF" setsid "$@" </dev/null >>"$STATE/log/$name.stdout" 2>&1 &
    echo $! >"$PIDS/$name.pid"
}

up() {
    need_binaries
    if alive munged && alive slurmctld && alive slurmd && answering; then
        echo "slurm-cluster: already up ($CONF)"
        return 0
    fi
    [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd launches jobs as their users)"
    stop_daemons quiet  # a half-started cluster from an earlier attempt
    write_config
    start munged munged -F --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket" \
        --pid-file="$STATE/pids/munged.selfpid" --seed-file="$STATE/munge/munge.seed" \
        --log-file="$STATE/log/munged.log"
    for _ in $(seq 50); do [[ -S $STATE/munge/munge.socket ]] && break; sleep 0.1; done
    [[ -S $STATE/munge/munge.socket ]] || { stop_daemons quiet; die "munged did not start: $(tail -3 "$STATE/log/munged.log" 2>/dev/null)"; }
    # -i: ignore saved state, so jobs of an earlier cluster do not come back.
    start slurmctld slurmctld -D -i -f "$CONF"
    start slurmd slurmd -D -f "$CONF"
    for _ in $(seq 150); do
        answering && break
        for name in munged slurmctld slurmd; do
            alive "$name" || { stop_daemons quiet; die "$name exited at start; see $STATE/log/"; }
        done
        sleep 0.2
    done
    if ! answering; then
        local why
        why=$(SLURM_CONF=$CONF sinfo -h -N -o '%t %E' 2>&1 | head -1)
        stop_daemons quiet
        die "node did not become idle in 30 s ($why); see $STATE/log/"
    fi
    echo "slurm-cluster: up, node $NODE ($CPUS cpus, $GPUS fake gpus); export SLURM_CONF=$CONF"
}

stop_daemons() {
    local quiet=${1:-} pids=() name pid
    for name in slurmd slurmctld munged; do
        pid=$(cat "$PIDS/$name.pid" 2>/dev/null) || continue
        kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" && pids+=("$pid")
        rm -f "$PIDS/$name.pid"
    done
    for _ in $(seq 100); do
        local running=()
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running+=("$pid"); done
        [[ ${#running[@]} -eq 0 ]] && break
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && kill -KILL "$pid"; done
    local left
    left=$(kill_marked "$MARK")  # slurmstepd of jobs that outlived slurmd
    [[ -n $quiet ]] || echo "slurm-cluster: down (stopped ${#pids[@]} daemons${left:+, killed leftovers $left})"
}

down() {
    if alive slurmctld; then
        SLURM_CONF=$CONF timeout 10 scancel --quiet --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 50); do
            [[ -z $(SLURM_CONF=$CONF timeout 5 squeue -h -o %i 2>/dev/null) ]] && break
            sleep 0.2
        done
    fi
    stop_daemons
    local left
    left=$(marked_pids "$MARK")
    [[ -z $left ]] || die "still running after down: $left"
}

case ${1:-} in
    up) up ;;
    down) down ;;
    status) alive munged && alive slurmctld && alive slurmd && answering ;;
    env) echo "export SLURM_CONF=$CONF" ;;
    *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
