"""The Grid Engine engine: qsub, qstat and qdel behind the batch engines' contract (the run session drives it).

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

__all__ = ["SgeEngine", "SgeRunError", "Submitted"]

QDEL_AGAIN_S = 3.0
QDEL_TIMEOUT_S = 300.0


class SgeRunError(DagflowError):
    pass


class SgeEngine(BatchEngine):
    """The Engine contract over qsub/qstat/qdel."""

    name: ClassVar[str] = "sge"
    summary: ClassVar[str] = "a Grid Engine cluster: qsub jobs (arrays where the wiring allows) with -hold_jid"
    options: ClassVar[tuple[EngineOption, ...]] = SGE_OPTIONS
    system: ClassVar[str] = OBSERVER.title
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

