"""Batch scripts: one per job array or single-node job, plus `node.sh`, the wrapper every node runs in.

The wrapper does for one node what the local runner does: it writes the node's `start` and `end` events
to the run's journal (one O_APPEND write each, so status reads one journal whichever engine ran the
plan), sends the node's output to `logs/<node>.out|.err`, and retries. Slurm has no per-job retry count,
so attempts happen inside the job: a failed attempt is retried unless its exit code is one of the step's
`unless_exit` codes, and only the last failure fails the job (which is what `afterok` and
`kill_invalid_depend` act on). Each attempt runs under coreutils `timeout` for the step's timeout; the
job's `--time` is a backstop sized for every attempt.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from dagflow.data import IMPORT_ROOT
from dagflow.plan import DAGFLOW_LAUNCHER, Node, Plan, StepInfo

KILL_GRACE_S = 10

NODE_SH = r"""# dagflow node wrapper, sourced by the batch scripts of one run. Written by dagflow; do not edit.
# Needs: node (JSON-quoted name in jnode), argv, retries, timeout_s, unless (" 2 3 "), grace.
now() { local t=${EPOCHREALTIME/,/.}; printf '%s' "$t"; }
micros() { local t=${EPOCHREALTIME/[.,]/}; printf '%s' "$t"; }
journal() { printf '%s\n' "$1" >>"$DAGFLOW_RUN_DIR/journal.jsonl"; }
jstr() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "$s"; }

run_node() {
    local attempt=0 rc why state t0 elapsed_us
    export DAGFLOW_NODE=$node
    : >"$DAGFLOW_RUN_DIR/logs/$node.out"
    : >"$DAGFLOW_RUN_DIR/logs/$node.err"
    while :; do
        attempt=$((attempt + 1))
        if ((attempt > 1)); then
            printf '\n=== dagflow: attempt %d ===\n' "$attempt" >>"$DAGFLOW_RUN_DIR/logs/$node.err"
        fi
        journal "{\"e\":\"start\",\"n\":$jnode,\"a\":$attempt,\"job\":\"${SLURM_JOB_ID:-}\",\"t\":$(now)}"
        t0=$(micros)
        if ((timeout_s > 0)); then
            timeout --kill-after="$grace" "$timeout_s" "${argv[@]}" \
                </dev/null >>"$DAGFLOW_RUN_DIR/logs/$node.out" 2>>"$DAGFLOW_RUN_DIR/logs/$node.err"
        else
            "${argv[@]}" </dev/null >>"$DAGFLOW_RUN_DIR/logs/$node.out" 2>>"$DAGFLOW_RUN_DIR/logs/$node.err"
        fi
        rc=$?
        elapsed_us=$(($(micros) - t0))
        why=
        if ((timeout_s > 0 && (rc == 124 || rc == 137) && elapsed_us >= timeout_s * 1000000)); then
            why="timed out after ${timeout_s}s"
        elif ((rc == 127)) && ! command -v -- "${argv[0]}" >/dev/null; then
            why="cannot start '${argv[0]}': No such file or directory"
            printf 'dagflow: %s\n' "$why" >>"$DAGFLOW_RUN_DIR/logs/$node.err"
        elif ((rc > 128 && rc < 160)); then
            why="killed by SIG$(kill -l $((rc - 128)))"
            rc=$((128 - rc))
        elif ((rc != 0)); then
            why="exit code $rc"
        fi
        if [[ -z $why ]]; then
            state=succeeded
        elif ((attempt <= retries)) && ! [[ $why == exit* && $unless == *" $rc "* ]]; then
            state=retry
        else
            state=failed
        fi
        local extra=
        [[ -z $why ]] || extra=",\"why\":$(jstr "$why")"
        journal "{\"e\":\"end\",\"n\":$jnode,\"a\":$attempt,\"s\":\"$state\",\"rc\":$rc$extra,\"t\":$(now)}"
        case $state in
            succeeded) exit 0 ;;
            failed) exit 1 ;;
        esac
    done
}
"""


def node_argv(node: Node) -> list[str]:
    """A node running dagflow itself runs this interpreter's dagflow (see the env set in the script)."""
    if node.argv and node.argv[0] == DAGFLOW_LAUNCHER:
        return [sys.executable, "-m", "dagflow", *node.argv[1:]]
    return list(node.argv)


def _node_case(node: Node) -> str:
    lines = [f"node={shlex.quote(node.name)}", f"jnode={shlex.quote(json.dumps(node.name))}"]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in node.env.items()]
    lines.append("argv=(" + " ".join(shlex.quote(arg) for arg in node_argv(node)) + ")")
    return "\n".join(lines)


def render_script(plan: Plan, step: StepInfo, tasks: dict[int, str], run_dir: Path, sbatch_argv: list[str]) -> str:
    """The batch script of one unit; tasks maps array task id (-1: not an array) to node name."""
    bin_dir = os.path.dirname(sys.executable)
    header = [
        "#!/bin/bash",
        f"# dagflow run {plan.run_id}, step {step.name}: {len(tasks)} node(s). Submitted with:",
        "#   sbatch " + " ".join(shlex.quote(arg) for arg in sbatch_argv),
        f"export DAGFLOW_RUN_ID={shlex.quote(plan.run_id)}",
        f"export DAGFLOW_RUN_DIR={shlex.quote(str(run_dir))}",
        # Like the local engine: `python` and `dagflow` in a node are the submitter's virtualenv's.
        f'export PATH={shlex.quote(bin_dir)}:"$PATH"',
        f"export PYTHONPATH={shlex.quote(IMPORT_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}}",
        f"source {shlex.quote(str(run_dir / 'slurm' / 'node.sh'))}",
        f"retries={step.retries} timeout_s={step.timeout_s or 0} grace={KILL_GRACE_S}",
        "unless=" + shlex.quote(" " + " ".join(str(code) for code in step.retry_unless_exit) + " "),
        f"cd {shlex.quote(str(Path(plan.workdir).absolute()))} || exit 1",
    ]
    if list(tasks) == [-1]:
        body = [_node_case(plan.nodes[tasks[-1]])]
    else:
        body = ['case "$SLURM_ARRAY_TASK_ID" in']
        for task, name in tasks.items():
            case = _node_case(plan.nodes[name]).replace("\n", "\n    ")
            body.append(f"{task})\n    {case}\n    ;;")
        body += ['*) echo "dagflow: no node for array task $SLURM_ARRAY_TASK_ID" >&2; exit 1 ;;', "esac"]
    return "\n".join([*header, *body, "run_node", ""])
