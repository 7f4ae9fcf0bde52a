"""Batch scripts: one per job array or single-node job, each running its node(s) through the shared node
wrapper (`python -m dagflow.engines.batch.node`, see engines/batch/node.py).

The wrapper does for one node what the local runner does: journals each attempt's `start` and `end`,
sends the node's output to `logs/<node>.out|.err`, and retries. Slurm has no per-job retry count, so
attempts happen inside the job, and only the last failure fails the job (which is what `afterok` and
`kill_invalid_depend` act on). Each attempt has the step's timeout; the job's `--time` is a backstop
sized for every attempt.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.batch.script import KILL_GRACE_S, CancelMarker, job_script, node_argv
from dagflow.plan import Plan, StepInfo

__all__ = ["KILL_GRACE_S", "NODE_SH", "node_argv", "render_script"]

# Runs made before the Python wrapper sourced a bash wrapper from slurm/node.sh; new runs write none.
NODE_SH = ""


def render_script(
    plan: Plan,
    step: StepInfo,
    tasks: dict[int, str],
    run_dir: Path,
    sbatch_argv: list[str],
    cancel: CancelMarker | None = None,
) -> str:
    """The batch script of one unit; tasks maps array task id (-1: not an array) to node name."""
    ids = ("$SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID")
    return job_script(plan, step, tasks, run_dir, ("sbatch", sbatch_argv), ids, parents=False, cancel=cancel)
