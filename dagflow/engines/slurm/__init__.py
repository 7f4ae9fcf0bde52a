"""The Slurm engine: a Plan becomes sbatch jobs (job arrays per step where the wiring allows) with
afterok/aftercorr dependencies, GRES GPUs and time limits; status folds squeue/scontrol into the run's
journal, so `dagflow status` reads the same whichever engine ran the plan.

from dagflow.engines.slurm import submit_slurm, wait_slurm
submitted = submit_slurm(plan, runs_dir)
status = wait_slurm(submitted.layout)
"""

from __future__ import annotations

import importlib
from typing import Any

# Imported on first use (PEP 562), so that importing one of this package's light modules (settings.py,
# which the CLI reads for every command) does not import the whole engine.
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
    "is_slurm_run": "observe",
    "read_slurm_status": "observe",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
