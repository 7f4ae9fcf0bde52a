"""The Grid Engine engine: a Plan becomes qsub jobs (job arrays per step where the wiring allows) held with
-hold_jid/-hold_jid_ad, `-l gpu=N` for GPUs, `-pe` for cpus, `-l h_rt` for time limits; the shared node
wrapper stops nodes below a failure (Grid Engine holds wait for a job's end, not its success), and status
folds `qstat -xml` into the run's journal, so `dagflow status` reads the same whichever engine ran the plan.

from dagflow.engines.sge import submit_sge, wait_sge
submitted = submit_sge(plan, runs_dir)
status = wait_sge(submitted.layout)
"""

from dagflow.engines.sge.commands import SgeError, SgeUnreachableError
from dagflow.engines.sge.engine import (
    SgeEngine,
    SgeRunError,
    Submitted,
    cancel_sge,
    prepare_sge,
    resume_sge,
    submit_sge,
    wait_sge,
)
from dagflow.engines.sge.observe import is_sge_run, read_sge_status

__all__ = [
    "SgeEngine",
    "SgeError",
    "SgeRunError",
    "SgeUnreachableError",
    "Submitted",
    "cancel_sge",
    "is_sge_run",
    "prepare_sge",
    "read_sge_status",
    "resume_sge",
    "submit_sge",
    "wait_sge",
]
