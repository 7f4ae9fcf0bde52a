"""Reading a Grid Engine run: what `qstat -xml` still holds, folded into the run's journal by the batch
engines' observer (engines/batch/observe.py). What is Grid Engine's own:

- the node wrapper journals `upstream_failed` for a node below a failure itself (it checks its parents
  before running), since a hold waits for a parent job's end, not its success.
- a node whose job left the queue while the journal shows it running never wrote its end: it was
  deleted (`dagflow cancel`: interrupted) or killed by Grid Engine (`h_rt`, its host: failed). qacct
  would say which, but lags up to 15 s behind a job's end, so the cancel record decides.
- a waiting node shows as `pending` while held for its parents, `queued` while waiting for a slot and
  `held` in Grid Engine's error state.
"""

from __future__ import annotations

from typing import ClassVar

from dagflow.engines.batch.observe import BatchObserver
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.sge import commands
from dagflow.run.journal import FAILED, INTERRUPTED, PENDING, Event, end_event
from dagflow.run.status import HELD, QUEUED

__all__ = ["OBSERVER"]

KILLED = "its Grid Engine job ended without a result (h_rt, memory, or its host)"


class SgeObserver(BatchObserver[commands.QueuedJob]):
    engine: ClassVar[str] = "sge"
    title: ClassVar[str] = "Grid Engine"
    still_queued: ClassVar[str] = "still queued"

    def lost_nodes(self, lost: list[str], jobs: list[JobRecord], cancelled: bool) -> list[Event]:
        if cancelled:
            return [end_event(name, INTERRUPTED, why="cancelled") for name in lost]
        return [end_event(name, FAILED, why=KILLED) for name in lost]

    def waiting_state(self, job: commands.QueuedJob) -> tuple[str, str | None] | None:
        if "E" in job.state:
            return HELD, f"Grid Engine error state ({job.state}); `qstat -j {job.job_id}` says why"
        if "qw" not in job.state:
            return None  # r, t (transferring), d (being deleted): the journal says the rest
        if "h" in job.state:
            return PENDING, None  # held until its parents' jobs end (-hold_jid)
        return QUEUED, "waiting for a slot"


OBSERVER = SgeObserver(commands.queued_jobs)
