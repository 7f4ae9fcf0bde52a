"""Job scripts: one per job array or single-node job, each running its node(s) through the shared node
wrapper (engines/batch/node.py) with `--parent`: `-hold_jid` waits for a parent job to end, not to
succeed, so the wrapper checks its parents' journal records and journals `upstream_failed` instead of
running below a failure. Retries and `unless_exit` happen inside the job, as on Slurm.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.batch.script import SINGLE, CancelMarker, job_script
from dagflow.plan import Plan, StepInfo


def render_script(
    plan: Plan,
    step: StepInfo,
    tasks: dict[int, str],
    run_dir: Path,
    qsub_argv: list[str],
    cancel: CancelMarker | None = None,
) -> str:
    """The job script of one unit; tasks maps array task id (-1: not an array) to node name."""
    ids = ("$JOB_ID" if list(tasks) == [SINGLE] else "$JOB_ID.$SGE_TASK_ID", "SGE_TASK_ID")
    return job_script(plan, step, tasks, run_dir, ("qsub", qsub_argv), ids, parents=True, cancel=cancel)
