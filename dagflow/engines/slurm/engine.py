"""The Slurm engine's entry points: submit a plan, resume, cancel, wait, behind the Engine contract.

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
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout
from dagflow.run.status import RunStatus

__all__ = [
    "SlurmEngine", "SlurmRunError", "Submitted",
    "cancel_slurm", "prepare_slurm", "resume_slurm", "submit_slurm", "wait_slurm",
]  # fmt: skip


class SlurmRunError(DagflowError):
    pass


class SlurmEngine(BatchEngine):
    """The Engine contract over sbatch/squeue/scancel."""

    name: ClassVar[str] = "slurm"
    summary: ClassVar[str] = "a Slurm cluster: sbatch jobs (arrays where the wiring allows) with dependencies"
    options: ClassVar[tuple[EngineOption, ...]] = SLURM_OPTIONS
    observer = OBSERVER
    run_error = SlurmRunError
    foreign_resume_hint = "; resume it with `dagflow run --resume`"

    def check_reachable(self) -> None:
        commands.max_array_size()

    def submit_nodes(self, plan: Plan, run_dir: Path, todo: list[str], sub: int, arrays: bool) -> list[JobRecord]:
        return submit_nodes(plan, run_dir, todo, sub, arrays)

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        commands.scancel([record.job for record in jobs])


def prepare_slurm(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunLayout:
    """Check the plan and create its run directory with the Slurm engine's files; submit nothing."""
    return SlurmEngine().prepare_run(plan, runs_dir)


def submit_slurm(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR, arrays: bool = True) -> Submitted:
    """Create the run directory and submit every node; returns once Slurm holds the whole DAG.

    arrays=False submits one job per node even where a job array would do (for comparison).
    """
    return SlurmEngine().submit_run(plan, runs_dir, arrays)


def resume_slurm(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> Submitted:
    """Submit again every node of the run that has not succeeded (failed, cancelled, never started)."""
    return SlurmEngine().resume_run(run_id, runs_dir)


def cancel_slurm(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunStatus:
    """scancel every job of the run's latest submission; running nodes end as interrupted."""
    return SlurmEngine().cancel_run(run_id, runs_dir)


def wait_slurm(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    """Poll until Slurm holds none of the run's jobs; return the final status."""
    return SlurmEngine().wait_run(layout, poll_s, timeout_s)
