#!/usr/bin/env bash
# A one-node Grid Engine cluster on localhost for dagflow's tests and benchmarks (Debian's gridengine 8.1.9).
#
#   scripts/sge-cluster.sh up      install the packages if missing, make the cell, start sge_qmaster and
#                                  sge_execd; wait until a `qsub -sync y` job succeeds
#   scripts/sge-cluster.sh down    delete every job, stop exactly the daemons `up` started and their jobs
#   scripts/sge-cluster.sh status  exit 0 when the cluster is up and answering
#   scripts/sge-cluster.sh env     print the exports the client commands need (SGE_ROOT, SGE_CELL, ports)
#
# Installing: when the binaries are missing `up` runs apt-get install (DEBIAN_FRONTEND=noninteractive) of
# gridengine-master, gridengine-exec and gridengine-client with a debconf preseed, so no question is asked.
# The packages' own cell (/var/lib/gridengine/default) is left alone and unused: this script makes a private
# cell instead, so everything lives in $DAGFLOW_SGE_DIR (default /tmp/dagflow-sge): root/ (SGE_ROOT: links
# to the packaged bin, lib, utilbin and util, plus default/common with bootstrap, act_qmaster, host_aliases
# and the accounting file), spool/ (qmaster and execd spool, berkeleydb), log/ and the editor script qconf
# is driven with. A fresh `up` wipes root/ and spool/, so jobs of an earlier cluster do not come back. `up` is
# idempotent: when both recorded daemons are alive and the queue answers it does nothing, so CI and the test
# fixture can both call it.
#
# Daemons and jobs run as root (bootstrap admin_user none; global config min_uid/min_gid 0). The queue all.q
# has DAGFLOW_SGE_SLOTS slots (default 8: tests want several jobs at once even on a 2-core machine), no load
# thresholds (a busy CI machine would otherwise put it in alarm state) and unix_behavior shells (a script's
# #! line is honoured). Fake GPUs are a consumable complex `gpu` with complex_values gpu=DAGFLOW_SGE_GPUS
# (default 4) on the exec host: `qsub -l gpu=1` takes one, more than that never schedules.
# Tunables: DAGFLOW_SGE_DIR, DAGFLOW_SGE_SLOTS, DAGFLOW_SGE_GPUS, DAGFLOW_SGE_PORT (sge_qmaster, default
# 6444; sge_execd uses the next one).
#
# Usage notes (Grid Engine 8.1.9): `qsub -b y 'echo hi'` fails ("Error reading answer list"), pass separate
# arguments, each shell-quoted: a binary job's arguments are joined with spaces and parsed again by /bin/sh
# (`qsub -b y sh -c 'exit 3'` runs `sh -c exit 3`; quote as "'exit 3'", Python's shlex.quote); -hold_jid waits for a job to end, not to succeed (exit 100 puts a job in Eqw and holds its
# dependants); qacct lags up to 15 s behind a job's end.
set -euo pipefail

STATE=${DAGFLOW_SGE_DIR:-/tmp/dagflow-sge}
SLOTS=${DAGFLOW_SGE_SLOTS:-8}
GPUS=${DAGFLOW_SGE_GPUS:-4}
PORT=${DAGFLOW_SGE_PORT:-6444}
ROOT=$STATE/root
CELL=default
SPOOL=$STATE/spool
PKGROOT=/var/lib/gridengine  # where the packages put bin/, lib/, utilbin/ and util/
NODE=$(hostname)
# Env marker on both daemons (so on every sge_shepherd and job they fork): lets `down` find leftovers of
# this cluster and nothing else.
MARK="DAGFLOW_SGE_STATE=$STATE"

# shellcheck source=lib/marked-pids.sh disable=SC1091
source "$(dirname "$0")/lib/marked-pids.sh"

# Set while `up` starts daemons: a failure then stops them instead of leaving half a cluster running.
CLEANUP=
die() {
    echo "sge-cluster: $*" >&2
    if [[ -n $CLEANUP ]]; then CLEANUP= && stop_daemons quiet; fi
    exit 1
}

# What every daemon and client command of this cluster needs. The /usr/bin wrappers honour SGE_ROOT/SGE_CELL
# from the environment over /etc/default/gridengine.
SGE_ENV=(SGE_ROOT="$ROOT" SGE_CELL="$CELL" SGE_QMASTER_PORT="$PORT" SGE_EXECD_PORT="$((PORT + 1))")
sge() { env "${SGE_ENV[@]}" "$@"; }

qc() {  # qc ARGS...: run qconf quietly (it reports success on stderr); on failure die with what it said
    local out
    out=$(sge qconf "$@" 2>&1) || die "qconf $* failed: $out"
}

installed() {
    local bin
    for bin in /usr/sbin/sge_qmaster /usr/sbin/sge_execd /usr/sbin/sge_shepherd /usr/bin/qsub /usr/bin/qconf \
        /usr/share/gridengine/scripts/init_cluster; do
        [[ -x $bin ]] || return 1
    done
}

install_packages() {
    installed && return 0
    command -v apt-get >/dev/null 2>&1 || die "Grid Engine is not installed and there is no apt-get to install it"
    echo "sge-cluster: installing gridengine-master, gridengine-exec, gridengine-client (apt-get)"
    # Without the preseed debconf asks whether to configure a cluster, its cell and its master host.
    debconf-set-selections <<EOF
gridengine-common shared/gridengineconfig boolean true
gridengine-common shared/gridenginecell string default
gridengine-common shared/gridenginemaster string $(hostname -s)
gridengine-master shared/gridengineconfig boolean true
gridengine-master shared/gridenginecell string default
gridengine-master shared/gridenginemaster string $(hostname -s)
gridengine-client shared/gridenginemaster string $(hostname -s)
EOF
    local apt=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q gridengine-master gridengine-exec
        gridengine-client)
    if ! "${apt[@]}" >"$STATE/log/apt.log" 2>&1; then
        # Stale or missing package lists (a fresh container): refresh them once and retry.
        apt-get update -q >>"$STATE/log/apt.log" 2>&1 || true
        "${apt[@]}" >>"$STATE/log/apt.log" 2>&1 || die "apt-get install failed: $(tail -3 "$STATE/log/apt.log")"
    fi
    installed || die "installed the packages but the Grid Engine binaries are still missing; see $STATE/log/apt.log"
}

pid_of() {  # pid_of qmaster|execd: the PID the daemon recorded (both daemonize, so $! is not theirs)
    case $1 in
        qmaster) cat "$SPOOL/qmaster/qmaster.pid" 2>/dev/null ;;
        execd) cat "$SPOOL"/execd/*/execd.pid 2>/dev/null | head -1 ;;
    esac
}

alive() {  # alive qmaster|execd: the recorded daemon still runs, and is one of ours
    local pid
    pid=$(pid_of "$1") || return 1
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && grep -qzxF -- "$MARK" "/proc/$pid/environ" 2>/dev/null
}

answering() {  # qmaster answers and all.q on this host has a load report and no error/unknown/disabled state
    sge timeout 10 qstat -f -q all.q 2>/dev/null \
        | awk '$1 ~ /^all\.q@/ { found = 1; if (NF >= 6 && $6 ~ /[auEdDsScC]/) bad = 1; if ($4 == "-NA-") bad = 1 }
               END { exit !(found && !bad) }'
}

edit_with() {  # edit_with SED_SCRIPT qconf -m...: run an interactive qconf edit with sed as the editor
    # qconf -Aq/-Mconf want complete files (a partial queue file fails with "required attribute seq_no is
    # missing"), so the interactive commands are driven instead: qconf writes the current object to a file,
    # runs $EDITOR on it and reads it back.
    local script=$1
    shift
    printf '%s\n' "$script" >"$STATE/edit.sed"
    local out
    out=$(sge EDITOR="$STATE/sed-editor" "$@" 2>&1) || die "$* failed: $out"
}

make_cell() {
    rm -rf "$ROOT" "$SPOOL"
    mkdir -p "$ROOT/$CELL/common" "$SPOOL"/{qmaster/job_scripts,execd,spooldb} "$STATE/log"
    local sub
    for sub in bin lib utilbin util; do ln -s "$PKGROOT/$sub" "$ROOT/$sub"; done
    cat >"$ROOT/$CELL/common/bootstrap" <<EOF
# Written by scripts/sge-cluster.sh: a one-node test cluster on localhost.
admin_user              none
default_domain          none
ignore_fqdn             true
spooling_method         berkeleydb
spooling_lib            libspoolb
spooling_params         $SPOOL/spooldb
binary_path             /usr/sbin
qmaster_spool_dir       $SPOOL/qmaster
security_mode           none
listener_threads        2
worker_threads          2
scheduler_threads       1
EOF
    echo "$NODE" >"$ROOT/$CELL/common/act_qmaster"
    # 127.0.0.1 resolves back to "localhost", which commlib compares with the client's own host name and
    # refuses ("client IP resolved to host name localhost ... not identical"): make them one host.
    echo "$NODE localhost" >"$ROOT/$CELL/common/host_aliases"
    # shellcheck disable=SC2016  # $1 is the editor's argument, expanded when qconf runs it
    printf '#!/bin/sh\nexec sed -i -E -f "%s" "$1"\n' "$STATE/edit.sed" >"$STATE/sed-editor"
    chmod +x "$STATE/sed-editor"
    sge /usr/share/gridengine/scripts/init_cluster "$ROOT" "$CELL" "$SPOOL/spooldb" root \
        >"$STATE/log/init_cluster.log" 2>&1 || die "init_cluster failed: $(tail -3 "$STATE/log/init_cluster.log")"
}

port_free() {  # port_free PORT: nobody listens on it (a Debian-started qmaster of the default cell would)
    ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .
}

configure() {
    # Global config: root's jobs (min_uid/min_gid 0), load reports every 5 s (40 s by default, and the queue
    # is unusable until the first one), no mail on this machine.
    edit_with "s|^min_uid .*|min_uid 0|
s|^min_gid .*|min_gid 0|
s|^load_report_time .*|load_report_time 00:00:05|
s|^execd_spool_dir .*|execd_spool_dir $SPOOL/execd|
s|^mailer .*|mailer /bin/true|" qconf -mconf global
    # Scheduler: every second (15 s by default), and again right after a submit or a job's end.
    edit_with 's|^schedule_interval .*|schedule_interval 0:0:1|
s|^flush_submit_sec .*|flush_submit_sec 1|
s|^flush_finish_sec .*|flush_finish_sec 1|
s|^schedd_job_info .*|schedd_job_info true|' qconf -msconf
    qc -as "$NODE"
    # Consumable fake GPUs, requested with -l gpu=N.
    sge qconf -sc >"$STATE/complexes"
    grep -q '^gpu ' "$STATE/complexes" || echo "gpu gpu INT <= YES YES 0 0" >>"$STATE/complexes"
    qc -Mc "$STATE/complexes"
    cat >"$STATE/exechost" <<EOF
hostname              $NODE
load_scaling          NONE
complex_values        gpu=$GPUS
user_lists            NONE
xuser_lists           NONE
projects              NONE
xprojects             NONE
usage_scaling         NONE
report_variables      NONE
EOF
    qc -Ae "$STATE/exechost"
    printf 'group_name @allhosts\nhostlist %s\n' "$NODE" >"$STATE/allhosts"
    qc -Ahgrp "$STATE/allhosts"
    cat >"$STATE/smp.pe" <<EOF
pe_name            smp
slots              $SLOTS
user_lists         NONE
xuser_lists        NONE
start_proc_args    NONE
stop_proc_args     NONE
allocation_rule    \$pe_slots
control_slaves     FALSE
job_is_first_task  TRUE
urgency_slots      min
accounting_summary FALSE
qsort_args         NONE
EOF
    qc -Ap "$STATE/smp.pe"
    # The template's pe_list names make and smp; the template is edited, the PE has to exist first.
    edit_with "s|^qname .*|qname all.q|
s|^hostlist .*|hostlist @allhosts|
s|^slots .*|slots $SLOTS|
s|^pe_list .*|pe_list smp|
s|^load_thresholds .*|load_thresholds NONE|
s|^shell .*|shell /bin/sh|
s|^shell_start_mode .*|shell_start_mode unix_behavior|" qconf -aq all.q
}

up() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (installs packages; sge_execd runs jobs as their users)"
    mkdir -p "$STATE/log"
    install_packages
    if alive qmaster && alive execd && answering; then
        echo "sge-cluster: already up (eval \"\$($0 env)\")"
        return 0
    fi
    stop_daemons quiet  # a half-started cluster from an earlier attempt
    local port
    for port in "$PORT" "$((PORT + 1))"; do
        port_free "$port" || die "port $port is in use (Debian's own gridengine-master/-exec of the default cell?" \
            "stop them, or set DAGFLOW_SGE_PORT)"
    done
    make_cell
    CLEANUP=1
    sge "$MARK" /usr/sbin/sge_qmaster </dev/null >>"$STATE/log/qmaster.stdout" 2>&1 \
        || die "sge_qmaster failed to start: $(tail -3 "$STATE/log/qmaster.stdout"; tail -3 "$SPOOL/qmaster/messages" 2>/dev/null)"
    for _ in $(seq 100); do sge timeout 5 qconf -sh >/dev/null 2>&1 && break; sleep 0.2; done
    sge timeout 5 qconf -sh >/dev/null 2>&1 || die "sge_qmaster does not answer after 20 s; see $SPOOL/qmaster/messages"
    configure
    sge "$MARK" /usr/sbin/sge_execd </dev/null >>"$STATE/log/execd.stdout" 2>&1 \
        || die "sge_execd failed to start: $(tail -3 "$STATE/log/execd.stdout")"
    # It writes its pid file a moment after it daemonizes.
    for _ in $(seq 50); do alive execd && break; sleep 0.2; done
    # Ready: the queue has a load report, then a real job goes through.
    local ok=
    for _ in $(seq 120); do
        if answering && sge timeout 60 qsub -sync y -b y -o /dev/null -e /dev/null -N sge-cluster-probe true \
            >/dev/null 2>&1; then
            ok=1
            break
        fi
        alive qmaster || die "sge_qmaster exited at start; see $SPOOL/qmaster/messages"
        alive execd || die "sge_execd exited at start; see $SPOOL/execd/*/messages"
        sleep 0.5
    done
    if [[ -z $ok ]]; then
        local why
        why=$(sge timeout 10 qstat -f -explain aAcE 2>&1 | tail -5)
        die "no job ran within 60 s ($why); see $SPOOL/qmaster/messages"
    fi
    CLEANUP=
    echo "sge-cluster: up, host $NODE ($SLOTS slots, $GPUS fake gpus as -l gpu=N); eval \"\$($0 env)\""
}

stop_daemons() {
    local quiet=${1:-} pids=() name pid
    for name in execd qmaster; do
        alive "$name" || continue
        pid=$(pid_of "$name")
        pids+=("$pid")
    done
    # Ask first (qconf -kej also kills execd's jobs, -km stops qmaster), then signal what is left.
    if alive execd && alive qmaster; then sge timeout 10 qconf -kej "$NODE" >/dev/null 2>&1 || true; fi
    if alive qmaster; then sge timeout 10 qconf -km >/dev/null 2>&1 || true; fi
    local i
    for i in $(seq 100); do
        local running=()
        for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running+=("$pid"); done
        [[ ${#running[@]} -eq 0 ]] && break
        if [[ $i -eq 30 ]]; then kill -TERM "${running[@]}" 2>/dev/null || true; fi  # deaf to qconf for 3 s
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid" || true; }; done
    local left
    left=$(kill_marked "$MARK")  # sge_shepherd and jobs that outlived sge_execd, or daemons whose pid file is gone
    [[ -n $quiet ]] || echo "sge-cluster: down (stopped ${#pids[@]} daemons${left:+, killed leftovers $left})"
}

down() {
    if alive qmaster; then
        sge timeout 10 qdel -u '*' >/dev/null 2>&1 || true
        for _ in $(seq 50); do
            [[ -z $(sge timeout 5 qstat -u '*' 2>/dev/null) ]] && break
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
    status) alive qmaster && alive execd && answering ;;
    env) echo "export SGE_ROOT=$ROOT SGE_CELL=$CELL SGE_QMASTER_PORT=$PORT SGE_EXECD_PORT=$((PORT + 1))" ;;
    *) echo "usage: $0 up|down|status|env" >&2; exit 2 ;;
esac
