"""The Slurm engine: a Plan becomes sbatch jobs (job arrays per step where the wiring allows) with
afterok/aftercorr dependencies, GRES GPUs and time limits; status folds squeue/scontrol into the run's
journal, so `dagflow status` reads the same whichever engine ran the plan.

Runs are started and continued through a run session (dagflow/run/session.py, engines/registry.py
run_session), which drives its engine class.
"""

from __future__ import annotations

from dagflow.lazy import lazy_exports

_EXPORTS = {
    "SlurmError": "commands",
    "SlurmUnreachableError": "commands",
    "SlurmEngine": "engine",
    "SlurmRunError": "engine",
    "Submitted": "engine",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
