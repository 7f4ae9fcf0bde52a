"""Job scripts: one per job array or single-node job, each running its node(s) through the shared node
wrapper (engines/batch/node.py) with `--parent`: `-hold_jid` waits for a parent job to end, not to
succeed, so the wrapper checks its parents' journal records and journals `upstream_failed` instead of
running below a failure. Retries and `unless_exit` happen inside the job, as on Slurm.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from dagflow.engines.batch.script import SINGLE, CancelMarker, dispatch, environment, wrapper_command
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
    header = [
        "#!/bin/bash",
        f"# dagflow run {plan.run_id}, step {step.name}: {len(tasks)} node(s). Submitted with:",
        "#   qsub " + " ".join(shlex.quote(arg) for arg in qsub_argv),
        *environment(plan, run_dir),
    ]
    job_ref = "$JOB_ID" if list(tasks) == [SINGLE] else "$JOB_ID.$SGE_TASK_ID"

    def command_for(name: str) -> str:
        return wrapper_command(plan, step, plan.nodes[name], run_dir, job_ref, parents=True, cancel=cancel)

    return "\n".join([*header, *dispatch("SGE_TASK_ID", tasks, command_for), ""])
