#!/bin/sh
# dagflow's node wrapper for HTCondor transfer mode (POSIX sh, so any execute node or image can run it).
#
#   dagflow-node.sh N OUTPUT_1 ... OUTPUT_N PROGRAM [ARGUMENT ...]
#
# Runs the node's command in the job's scratch directory, then hands back its declared outputs: after a
# success each OUTPUT (a path relative to the scratch directory) is moved under _dagflow_outputs/, which
# the submit file transfers back and remaps onto the pipeline's directory. A declared output that is not
# there fails the node (exit 1) with a line naming it. After a failure nothing is sent back and the
# command's exit code is the job's, so HTCondor never holds the job for outputs a failed command did not
# write (a missing entry of transfer_output_files would).
# Names never hold blanks, commas or line breaks (dagflow refuses them: HTCondor's transfer lists cannot
# carry them), so word splitting of $outputs is safe; globbing is off.
set -f
outbox=_dagflow_outputs
count=$1
shift
outputs=
while [ "$count" -gt 0 ]; do
    outputs="$outputs $1"
    shift
    count=$((count - 1))
done
mkdir -p "$outbox" || exit 1

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
if [ "$missing" -ne 0 ]; then
    exit 1
fi
for path in $outputs; do
    if [ -e "$path" ]; then  # an output inside an earlier (directory) output has moved with it
        mkdir -p "$outbox/$(dirname "$path")" && mv "$path" "$outbox/$path" || exit 1
    fi
done
exit 0
