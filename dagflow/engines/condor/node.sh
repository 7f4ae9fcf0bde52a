#!/bin/sh
# dagflow's node wrapper for HTCondor transfer mode (POSIX sh, so any execute node or image can run it).
#
#   dagflow-node.sh [--progress METRICS] N OUTPUT_1 ... OUTPUT_N PROGRAM [ARGUMENT ...]
#
# With --progress (a search's objective node under early stopping, submitted with stream_error = true),
# every complete line the command appends to METRICS is copied onto stderr as `dagflow-progress: LINE`
# while the command runs, after a `dagflow-progress-start: ID` line (ID differs at each start), so the
# scheduler reads them from the node's stderr file on the access point (search/progress.py). The copier
# checks the file once a second, stops with the command (after a last look) and is waited for; it never
# changes the exit code. Nothing else comes back early: stderr is already the job's.
#
# Runs the node's command in the job's scratch directory. After a success it checks each declared OUTPUT
# (a path relative to the scratch directory) is there; one that is not fails the node (exit 1) with a line
# naming it, and so does a symbolic link to a directory (or to nothing) in one, which HTCondor cannot send
# back. Otherwise the command's exit code is the job's. What comes back is HTCondor's business, not
# this script's: the submit file lists exactly the declared outputs in transfer_output_files, and its
# success_exit_code makes a job that exits non-zero send back only its stdout and stderr, so nothing the
# job writes elsewhere (or writes later, from a process it left behind) reaches the access point.
# Names never hold blanks, commas or line breaks (dagflow refuses them: HTCondor's transfer lists cannot
# carry them), so word splitting of $outputs is safe; globbing is off.
set -f
progress=
if [ "$1" = "--progress" ]; then
    progress=$2
    shift 2
fi
count=$1
shift
outputs=
while [ "$count" -gt 0 ]; do
    outputs="$outputs $1"
    shift
    count=$((count - 1))
done

# Copies the complete lines appended to $progress since the last look onto stderr, marked.
relay_new_lines() {
    [ -f "$progress" ] || return 0
    total=$(wc -l < "$progress" 2>/dev/null) || return 0
    total=$((total + 0))
    if [ "$total" -gt "$sent" ]; then
        tail -n "+$((sent + 1))" "$progress" | head -n "$((total - sent))" | sed 's/^/dagflow-progress: /' >&2
        sent=$total
    fi
}

# The command runs as a child so that a soft kill (condor_rm, a vacate) reaches it, not only this shell.
if [ -n "$progress" ]; then
    echo "dagflow-progress-start: $$-$(date +%s 2>/dev/null)" >&2
fi
"$@" &
child=$!
relay=
if [ -n "$progress" ]; then
    (
        sent=0
        while kill -0 "$child" 2>/dev/null; do
            relay_new_lines
            sleep 1
        done
        relay_new_lines
    ) &
    relay=$!
fi
trap 'kill -TERM "$child" 2>/dev/null' TERM INT HUP
while :; do
    wait "$child"
    status=$?
    kill -0 "$child" 2>/dev/null || break
done
trap - TERM INT HUP
if [ -n "$relay" ]; then
    wait "$relay" 2>/dev/null
fi
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

# HTCondor cannot send back a symbolic link to a directory, or one to nothing: it holds the job
# (TransferOutputError) once part of the outputs has landed, with an empty file where the link was.
# Such a link fails the node here instead, so that nothing comes back. A link to a file is sent as
# the file it names. Names inside an output directory may hold blanks, so find hands them over.
for path in $outputs; do
    [ -e "$path" ] || continue
    find "$path" -type l -exec sh -c '
        status=0
        for link; do
            if [ -d "$link" ]; then
                what="a symbolic link to a directory ($(readlink "$link"))"
            elif [ ! -e "$link" ]; then
                what="a symbolic link to nothing ($(readlink "$link"))"
            else
                continue
            fi
            where="holds $link,"
            [ "$link" = "$0" ] && where=is
            echo "dagflow: declared output $0 $where $what, which HTCondor cannot send back;" \
                "make it a copy or a real directory, or declare the directory it names instead" >&2
            status=1
        done
        exit "$status"' "$path" {} + || missing=1
done
exit "$missing"
