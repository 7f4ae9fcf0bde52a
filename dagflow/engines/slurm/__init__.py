"""The Slurm engine: a Plan becomes sbatch jobs (job arrays per step where the wiring allows) with
afterok/aftercorr dependencies, GRES GPUs and time limits; status folds squeue/scontrol into the run's
journal, so `dagflow status` reads the same whichever engine ran the plan.

from dagflow.engines.slurm import submit_slurm, wait_slurm
submitted = submit_slurm(plan, runs_dir)
status = wait_slurm(submitted.layout)
"""

from dagflow.engines.slurm.commands import SlurmError, SlurmUnreachableError
from dagflow.engines.slurm.engine import (
    SlurmEngine,
    SlurmRunError,
    Submitted,
    cancel_slurm,
    prepare_slurm,
    resume_slurm,
    submit_slurm,
    wait_slurm,
)
from dagflow.engines.slurm.observe import is_slurm_run, read_slurm_status

__all__ = [
    "SlurmEngine",
    "SlurmError",
    "SlurmRunError",
    "SlurmUnreachableError",
    "Submitted",
    "cancel_slurm",
    "is_slurm_run",
    "prepare_slurm",
    "read_slurm_status",
    "resume_slurm",
    "submit_slurm",
    "wait_slurm",
]
