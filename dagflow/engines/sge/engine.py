"""The Grid Engine engine's entry points: submit a plan, resume, cancel, wait, behind the Engine contract.

A run directory is the local engine's plus `sge/` (see records.py); Grid Engine holds the DAG
(`-hold_jid`, `-hold_jid_ad`) and the node wrapper stops below a failure. What every batch engine does
alike is engines/batch/engine.py.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineOption
from dagflow.engines.batch.engine import BatchEngine
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.sge import commands
from dagflow.engines.sge.observe import OBSERVER
from dagflow.engines.sge.settings import DEFAULT_PE, SGE_OPTIONS, checked_pe
from dagflow.engines.sge.submit import submit_nodes
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout
from dagflow.run.status import RunStatus

__all__ = [
    "SgeEngine", "SgeRunError", "Submitted",
    "cancel_sge", "prepare_sge", "resume_sge", "submit_sge", "wait_sge",
]  # fmt: skip

QDEL_AGAIN_S = 3.0
QDEL_TIMEOUT_S = 300.0


class SgeRunError(DagflowError):
    pass


class SgeEngine(BatchEngine):
    """The Engine contract over qsub/qstat/qdel."""

    name: ClassVar[str] = "sge"
    summary: ClassVar[str] = "a Grid Engine cluster: qsub jobs (arrays where the wiring allows) with -hold_jid"
    options: ClassVar[tuple[EngineOption, ...]] = SGE_OPTIONS
    observer = OBSERVER
    run_error = SgeRunError

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        checked_pe(self.pe)  # before anything is created: the name reaches qsub and the job scripts

    @property
    def pe(self) -> str:
        return str(self.settings.get("sge_pe") or DEFAULT_PE)

    def check_reachable(self) -> None:
        commands.max_array_size()

    def submit_nodes(self, plan: Plan, run_dir: Path, todo: list[str], sub: int, arrays: bool) -> list[JobRecord]:
        return submit_nodes(plan, run_dir, todo, sub, arrays, self.pe)

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        """Descendants first, so that deleting a parent releases no held child, and again every few seconds
        for what is still queued: the qmaster of a big array can answer a qdel before it has deleted every
        task."""
        numbers = [record.job for record in reversed(jobs)]
        deadline = time.monotonic() + QDEL_TIMEOUT_S
        while True:
            left = set(numbers) & {job.job_id for job in commands.queued_jobs()}
            if not left or time.monotonic() > deadline:
                break
            commands.qdel([number for number in numbers if number in left])
            time.sleep(QDEL_AGAIN_S)


def prepare_sge(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunLayout:
    """Check the plan and create its run directory with the engine's files; submit nothing."""
    return SgeEngine().prepare_run(plan, runs_dir)


def submit_sge(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR, arrays: bool = True, pe: str = DEFAULT_PE) -> Submitted:
    """Create the run directory and submit every node; returns once Grid Engine holds the whole DAG.

    arrays=False submits one job per node even where a job array would do (for comparison).
    """
    return SgeEngine(settings={"sge_pe": pe}).submit_run(plan, runs_dir, arrays)


def resume_sge(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR, pe: str = DEFAULT_PE) -> Submitted:
    """Submit again every node of the run that has not succeeded (failed, cancelled, never started)."""
    return SgeEngine(settings={"sge_pe": pe}).resume_run(run_id, runs_dir)


def cancel_sge(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunStatus:
    """qdel every job of the run's latest submission (see SgeEngine.cancel_jobs); running nodes end as
    interrupted."""
    return SgeEngine().cancel_run(run_id, runs_dir)


def wait_sge(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    """Poll until Grid Engine holds none of the run's jobs; return the final status."""
    return SgeEngine().wait_run(layout, poll_s, timeout_s)
