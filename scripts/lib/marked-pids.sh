# Sourced by the test-cluster scripts (slurm-cluster.sh, condor-pool.sh).
# marked_pids MARK: the processes whose environment holds MARK (NAME=VALUE) exactly: the daemons a script
# started with that marker and everything they forked, and nothing else on the machine.
marked_pids() {
    local mark=$1 environ pid
    for environ in /proc/[0-9]*/environ; do
        pid=${environ#/proc/}
        pid=${pid%/environ}
        [[ $pid -ne $$ ]] || continue
        grep -qzxF -- "$mark" "$environ" 2>/dev/null && echo "$pid"
    done
    return 0
}

# kill_marked MARK: SIGKILL every process marked MARK that is still running (jobs or daemons that outlived
# the orderly stop) and print their pids, so the caller can say what it had to kill.
kill_marked() {
    local left
    left=$(marked_pids "$1")
    if [[ -n $left ]]; then
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null || true
        sleep 0.2
    fi
    echo "$left"
}
