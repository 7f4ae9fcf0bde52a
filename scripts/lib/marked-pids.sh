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
