"""The Slurm engine: sbatch, squeue and scancel behind the batch engines' contract (the run session drives it).

A run directory is the local engine's plus `slurm/` (see records.py); Slurm holds the DAG (`afterok`/
`aftercorr` dependencies). What every batch engine does alike is engines/batch/engine.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from dagflow.engines.base import EngineOption
from dagflow.engines.batch.engine import BatchEngine
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.slurm import commands
from dagflow.engines.slurm.observe import OBSERVER
from dagflow.engines.slurm.settings import SLURM_OPTIONS
from dagflow.engines.slurm.submit import submit_nodes
from dagflow.errors import DagflowError
from dagflow.plan import Plan

__all__ = ["SlurmEngine", "SlurmRunError", "Submitted"]


class SlurmRunError(DagflowError):
    pass


class SlurmEngine(BatchEngine):
    """The Engine contract over sbatch/squeue/scancel."""

    name: ClassVar[str] = "slurm"
    summary: ClassVar[str] = "a Slurm cluster: sbatch jobs (arrays where the wiring allows) with dependencies"
    options: ClassVar[tuple[EngineOption, ...]] = SLURM_OPTIONS
    system: ClassVar[str] = OBSERVER.title
    observer = OBSERVER
    run_error = SlurmRunError

    def check_reachable(self) -> None:
        commands.max_array_size()

    def submit_nodes(self, plan: Plan, run_dir: Path, todo: list[str], sub: int, arrays: bool) -> list[JobRecord]:
        return submit_nodes(plan, run_dir, todo, sub, arrays)

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        commands.scancel([record.job for record in jobs])

