#!/usr/bin/env bash
# A one-machine HTCondor pool for dagflow's tests and benchmarks (../shared/htcondor's 25.14 build).
#
#   scripts/condor-pool.sh up       unpack the release if needed, start condor_master (collector,
#                                   negotiator, schedd, partitionable startd with simulated GPUs) as the
#                                   pool user; wait until the startd is in the collector
#   scripts/condor-pool.sh down     remove every job, stop exactly the daemons `up` started
#   scripts/condor-pool.sh status   exit 0 when the pool is up and its startd is in the collector
#   scripts/condor-pool.sh env      print the exports a client needs (CONDOR_CONFIG, PATH)
#   scripts/condor-pool.sh user     print the pool user (jobs are submitted, queried and removed as it)
#
# Everything lives in $DAGFLOW_CONDOR_DIR (default /var/tmp/dagflow-condor): the unpacked release, the
# configuration, the daemons' log, spool and execute directories, and work/, a directory the pool user
# owns where tests put pipelines and run directories. Not under /tmp: DAGMan refuses (DAGMAN_USE_STRICT)
# node logs under /tmp. `up` is idempotent, so CI and the test fixture can both call it.
#
# HTCondor refuses jobs owned by root, so the pool runs as an unprivileged user ($DAGFLOW_CONDOR_USER,
# default condorpool, created when missing) as a "personal condor": every daemon runs as that user and
# jobs run as it too. Jobs run the project's Python environment ($DAGFLOW_CONDOR_PYTHON, default the
# checkout's .venv/bin/python): when the pool user cannot reach that interpreter (a pyenv Python under a
# mode-700 /root), `up` adds the search (x) permission for others on the directories in the way, records
# them, and `down` takes it back.
# Tunables: DAGFLOW_CONDOR_TARBALL (the release), DAGFLOW_CONDOR_PORT (collector, default 29618),
# DAGFLOW_CONDOR_GPUS (condor_gpu_discovery's -simulate, default 2,1,4,1: a V100 16 GB and an A100
# 40 GB; `real`: HTCondor's own discovery of this machine's GPUs, with its GPU monitor), DAGFLOW_CONDOR_CPUS (default 8), DAGFLOW_CONDOR_MEMORY (MB, default 16384).
set -euo pipefail

HERE=$(cd "$(dirname "$0")/.." && pwd)
STATE=${DAGFLOW_CONDOR_DIR:-/var/tmp/dagflow-condor}
POOL_USER=${DAGFLOW_CONDOR_USER:-condorpool}
PORT=${DAGFLOW_CONDOR_PORT:-29618}
GPUS=${DAGFLOW_CONDOR_GPUS:-2,1,4,1}
CPUS=${DAGFLOW_CONDOR_CPUS:-8}
MEMORY=${DAGFLOW_CONDOR_MEMORY:-16384}
PYTHON=${DAGFLOW_CONDOR_PYTHON:-$HERE/.venv/bin/python}
RELEASE=$STATE/release/htcondor
CONF=$STATE/condor_config
# Env marker on condor_master (so on every daemon, starter and job it forks): `down` finds leftovers of
# this pool and nothing else.
MARK="DAGFLOW_CONDOR_STATE=$STATE"

# shellcheck source=lib/marked-pids.sh
source "$(dirname "$0")/lib/marked-pids.sh"

die() { echo "condor-pool: $*" >&2; exit 1; }

if [[ $(id -u) -ne 0 ]]; then
    POOL_USER=$(id -un)  # not root: a personal pool of the user running this script
fi

as_pool() {  # as_pool CMD...: run CMD as the pool user with the pool's client environment
    local env=(env "CONDOR_CONFIG=$CONF" "PATH=$RELEASE/bin:$RELEASE/sbin:/usr/local/bin:/usr/bin:/bin")
    if [[ $(id -un) == "$POOL_USER" ]]; then
        "${env[@]}" "$@"
    else
        runuser -u "$POOL_USER" -- "${env[@]}" "$@"
    fi
}

tarball() {
    local found
    if [[ -n ${DAGFLOW_CONDOR_TARBALL:-} ]]; then
        echo "$DAGFLOW_CONDOR_TARBALL"
        return
    fi
    found=$(ls "$HERE"/../shared/htcondor/htcondor-*-debian12-x86_64.tar.xz 2>/dev/null | sort | tail -1 || true)
    [[ -n $found ]] || die "no HTCondor release: set DAGFLOW_CONDOR_TARBALL or put ../shared/htcondor/ beside the checkout"
    echo "$found"
}

unpack() {
    [[ -x $RELEASE/sbin/condor_master ]] && return 0
    local archive
    archive=$(tarball)
    [[ -r $archive ]] || die "cannot read $archive"
    mkdir -p "$STATE/release.partial"
    tar -xJf "$archive" -C "$STATE/release.partial"
    rm -rf "$STATE/release"
    mv "$STATE/release.partial" "$STATE/release"
    chmod -R a+rX "$STATE/release"
}

ensure_user() {
    id "$POOL_USER" >/dev/null 2>&1 && return 0
    [[ $(id -u) -eq 0 ]] || die "pool user $POOL_USER does not exist"
    useradd --system --create-home --home-dir "/var/lib/$POOL_USER" --shell /bin/bash "$POOL_USER"
}

grant_python() {  # let the pool user reach (not list) the interpreter the jobs run and its environment
    [[ -e $PYTHON ]] || return 0
    [[ $(id -u) -eq 0 ]] || return 0
    as_pool "$PYTHON" -c 'import dagflow' 2>/dev/null && return 0
    local start dir
    # The venv's own path (its site-packages, an editable checkout beside it) and the interpreter it links to.
    for start in "$(dirname "$PYTHON")" "$(dirname "$(readlink -f "$PYTHON")")"; do
        dir=$start
        while [[ $dir != / ]]; do
            if [[ $(stat -c %A "$dir") != ?????????[xt] ]]; then  # others may not search it
                chmod o+x "$dir"
                echo "$dir" >>"$STATE/granted"
            fi
            dir=$(dirname "$dir")
        done
    done
    as_pool "$PYTHON" -c 'import dagflow' 2>/dev/null \
        || die "the pool user $POOL_USER cannot run $PYTHON with dagflow importable (set DAGFLOW_CONDOR_PYTHON to an interpreter it can read)"
}

revoke_python() {
    [[ -s $STATE/granted ]] || return 0
    local dir
    while read -r dir; do chmod o-x "$dir" 2>/dev/null || true; done <"$STATE/granted"
    rm -f "$STATE/granted"
}

gpu_discovery() {  # simulated GPUs, or (real) the stock discovery and monitor that `use FEATURE: GPUs` sets
    if [[ $GPUS == real ]]; then
        echo "# GPUs: condor_gpu_discovery finds this machine's devices; condor_gpu_utilization samples them."
    else
        echo "GPU_DISCOVERY_EXTRA = -simulate:$GPUS"
    fi
}

write_config() {
    mkdir -p "$STATE"/{log,spool,execute,lock,run,cred,work}
    cat >"$CONF" <<EOF
# Written by scripts/condor-pool.sh: a one-machine test pool on 127.0.0.1.
RELEASE_DIR = $RELEASE
LOCAL_DIR = $STATE
BIN = \$(RELEASE_DIR)/bin
SBIN = \$(RELEASE_DIR)/sbin
LIB = \$(RELEASE_DIR)/lib
LIBEXEC = \$(RELEASE_DIR)/libexec
LOG = \$(LOCAL_DIR)/log
SPOOL = \$(LOCAL_DIR)/spool
EXECUTE = \$(LOCAL_DIR)/execute
LOCK = \$(LOCAL_DIR)/lock
RUN = \$(LOCAL_DIR)/run
SEC_CREDENTIAL_DIRECTORY_OAUTH = \$(LOCAL_DIR)/cred
CONDOR_HOST = 127.0.0.1
NETWORK_INTERFACE = 127.0.0.1
COLLECTOR_HOST = 127.0.0.1:$PORT
USE_SHARED_PORT = False
use ROLE: CentralManager
use ROLE: Submit
use ROLE: Execute
# Fast cycles, as HTCondor's own minicondor configuration uses for tests.
SCHEDD_INTERVAL = 5
NEGOTIATOR_INTERVAL = 2
NEGOTIATOR_CYCLE_DELAY = 5
STARTER_UPDATE_INTERVAL = 5
SHADOW_QUEUE_UPDATE_INTERVAL = 10
UPDATE_INTERVAL = 5
PERIODIC_EXPR_INTERVAL = 5
RUNBENCHMARKS = 0
NUM_CPUS = $CPUS
MEMORY = $MEMORY
use FEATURE: PartitionableSlot
use FEATURE: GPUs
$(gpu_discovery)
# The node agent advertises HAS_GPU on GPU machines; this pool's machine has (simulated) GPUs.
HAS_GPU = True
STARTD_ATTRS = \$(STARTD_ATTRS) HAS_GPU
SEC_DEFAULT_AUTHENTICATION_METHODS = FS, IDTOKENS
ALLOW_ADMINISTRATOR = $POOL_USER@*
ALLOW_WRITE = *
ALLOW_READ = *
CONDOR_Q_ONLY_MY_JOBS = False
CONDOR_Q_DASH_BATCH_IS_DEFAULT = False
# Jobs that finish stay in condor_history; the test machine has no mail.
MAIL = /bin/true
EOF
    # Extra settings (the node agent's generated file, in tests) go in config.d/, read last.
    mkdir -p "$STATE/config.d"
    echo "LOCAL_CONFIG_DIR = $STATE/config.d" >>"$CONF"
    if [[ $(id -u) -eq 0 ]]; then
        chown -R "$POOL_USER" "$STATE"/{log,spool,execute,lock,run,cred,work,config.d}
        chmod 700 "$STATE/cred"
    fi
}

master_alive() {
    local pid
    pid=$(cat "$STATE/master.pid" 2>/dev/null) || return 1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null
}

answering() {  # the startd's slot is in the collector and the schedd answers
    as_pool timeout 10 condor_status -startd -af Name 2>/dev/null | grep -q . \
        && as_pool timeout 10 condor_q -totals >/dev/null 2>&1
}

up() {
    if master_alive && answering; then
        grant_python  # a later caller may bring the environment its jobs run (CI makes the venv after `up`)
        echo "condor-pool: already up ($CONF)"
        return 0
    fi
    stop_daemons quiet  # a half-started pool from an earlier attempt
    ensure_user
    mkdir -p "$STATE"
    [[ $(id -u) -ne 0 ]] || chmod 755 "$STATE"
    unpack
    write_config
    grant_python
    local env=(env "$MARK" "CONDOR_CONFIG=$CONF" "PATH=$RELEASE/bin:$RELEASE/sbin:/usr/local/bin:/usr/bin:/bin")
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u "$POOL_USER" -- "${env[@]}" setsid "$RELEASE/sbin/condor_master" -f \
            </dev/null >>"$STATE/master.stdout" 2>&1 &
    else
        "${env[@]}" setsid "$RELEASE/sbin/condor_master" -f </dev/null >>"$STATE/master.stdout" 2>&1 &
    fi
    echo $! >"$STATE/master.pid"
    for _ in $(seq 120); do
        answering && break
        master_alive || { stop_daemons quiet; die "condor_master exited at start; see $STATE/log/MasterLog"; }
        sleep 0.5
    done
    answering || { stop_daemons quiet; die "the startd did not reach the collector in 60 s; see $STATE/log/"; }
    echo "condor-pool: up as $POOL_USER ($CPUS cpus, gpus: $([[ $GPUS == real ]] && echo "this machine's" || echo "simulated $GPUS")); eval \"\$($0 env)\""
}

stop_daemons() {
    local quiet=${1:-} pid stopped=0
    pid=$(cat "$STATE/master.pid" 2>/dev/null || true)
    if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid"  # condor_master stops its daemons on SIGTERM (no condor_off in this build)
        stopped=1
        for _ in $(seq 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    fi
    rm -f "$STATE/master.pid"
    local left
    left=$(kill_marked "$MARK")  # starters and jobs that outlived the master
    [[ -n $quiet ]] || echo "condor-pool: down (stopped ${stopped} master${left:+, killed leftovers $left})"
}

down() {
    if master_alive; then
        as_pool timeout 20 condor_rm -all >/dev/null 2>&1 || true
        for _ in $(seq 50); do
            [[ $(as_pool timeout 10 condor_q -af ClusterId 2>/dev/null | wc -l) -eq 0 ]] && break
            sleep 0.2
        done
    fi
    stop_daemons
    revoke_python
    local left
    left=$(marked_pids "$MARK")
    [[ -z $left ]] || die "still running after down: $left"
}

case ${1:-} in
    up) up ;;
    unpack) mkdir -p "$STATE" && unpack ;;  # the tools alone (condor_dag_checker), no daemons
    down) down ;;
    status) master_alive && answering ;;
    env) echo "export CONDOR_CONFIG=$CONF PATH=$RELEASE/bin:\$PATH" ;;
    user) echo "$POOL_USER" ;;
    *) echo "usage: $0 up|unpack|down|status|env|user" >&2; exit 2 ;;
esac
