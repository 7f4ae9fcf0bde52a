#!/bin/sh
# dagflow's node wrapper for HTCondor transfer mode (POSIX sh, so any execute node or image can run it).
#
#   dagflow-node.sh N OUTPUT_1 ... OUTPUT_N PROGRAM [ARGUMENT ...]
#
# Runs the node's command in the job's scratch directory. After a success it checks each declared OUTPUT
# (a path relative to the scratch directory) is there; one that is not fails the node (exit 1) with a line
# naming it. Otherwise the command's exit code is the job's. What comes back is HTCondor's business, not
# this script's: the submit file lists exactly the declared outputs in transfer_output_files, and its
# success_exit_code makes a job that exits non-zero send back only its stdout and stderr, so nothing the
# job writes elsewhere (or writes later, from a process it left behind) reaches the access point.
# Names never hold blanks, commas or line breaks (dagflow refuses them: HTCondor's transfer lists cannot
# carry them), so word splitting of $outputs is safe; globbing is off.
set -f
count=$1
shift
outputs=
while [ "$count" -gt 0 ]; do
    outputs="$outputs $1"
    shift
    count=$((count - 1))
done

# The command runs as a child so that a soft kill (condor_rm, a vacate) reaches it, not only this shell.
"$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || break
done
trap - TERM INT HUP
if [ "$status" -ne 0 ]; then
    exit "$status"
fi

missing=0
for path in $outputs; do
    if [ ! -e "$path" ]; then
        echo "dagflow: declared output $path was not written by the command (in $(pwd))" >&2
        missing=1
    fi
done
exit "$missing"
