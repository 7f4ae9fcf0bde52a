"""The Slurm engine: a Plan becomes sbatch jobs (job arrays per step where the wiring allows) with
afterok/aftercorr dependencies, GRES GPUs and time limits; status folds squeue/scontrol into the run's
journal, so `dagflow status` reads the same whichever engine ran the plan.

from dagflow.engines.slurm import submit_slurm, wait_slurm
submitted = submit_slurm(plan, runs_dir)
status = wait_slurm(submitted.layout)
"""

from __future__ import annotations

from dagflow.lazy import lazy_exports

_EXPORTS = {
    "SlurmError": "commands",
    "SlurmUnreachableError": "commands",
    "SlurmEngine": "engine",
    "SlurmRunError": "engine",
    "Submitted": "engine",
    "cancel_slurm": "engine",
    "prepare_slurm": "engine",
    "resume_slurm": "engine",
    "submit_slurm": "engine",
    "wait_slurm": "engine",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
