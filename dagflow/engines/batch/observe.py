"""Reading a batch engine's run (Slurm, Grid Engine): what the scheduler still holds, folded into the run's
journal.

The node wrapper journals every attempt's start and end itself, so the journal already holds most of a
run. What only the scheduler knows is added here, as journal events, so that `dagflow status` reads one
journal for every engine:

- a node whose job left the queue while the journal shows it running never got to write its end: the
  engine says how it ended (`lost_nodes`);
- a node that never started and whose job is gone, below a failed node, is `upstream_failed`, as the
  local engine journals it (outcome.py);
- once nothing of the latest submission is queued, a `finish` event with the run's state.

That is the run's ingest (`reconcile`, by whoever waits on the run, and by `dagflow status` before it reads);
`read_status` itself reads the queue and the journal and writes nothing. The run counts as running (the
status view's "runner alive") while the scheduler holds any of its jobs.
Each engine subclasses BatchObserver with how its scheduler is asked and what its states mean.
"""

from __future__ import annotations

import fcntl
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Generic, Protocol, TypeVar

from dagflow.engines.batch.outcome import blocked_nodes, run_state
from dagflow.engines.batch.records import BatchRecords, JobRecord
from dagflow.plan import Plan
from dagflow.run.journal import (
    CHECKPOINTED,
    RETRYING,
    RUNNING,
    Event,
    JournalState,
    NodeRecord,
    append_events,
    finish_event,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.status import RunStatus


class QueuedJob(Protocol):
    """One job (or array task) the scheduler still holds."""

    @property
    def job_id(self) -> str: ...

    @property
    def task(self) -> int | None: ...  # array task id, or None for a plain job


Q = TypeVar("Q", bound=QueuedJob)


@contextmanager
def observe_lock(records: BatchRecords) -> Iterator[None]:
    """One observer writes reconciliation events at a time (two `dagflow status` calls, say)."""
    fd = os.open(records.dir / "observe.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class BatchObserver(ABC, Generic[Q]):
    """A batch engine's run as its scheduler and its journal show it."""

    engine: ClassVar[str]  # the engine's registry name, also its records' folder in the run directory
    title: ClassVar[str]  # the scheduler's name in the status notes: "Slurm"
    still_queued: ClassVar[str]  # how the status note ends: "still in Slurm's queue"

    def __init__(self, queued_jobs: Callable[[], list[Q]]) -> None:
        self.queued_jobs = queued_jobs  # every job the scheduler holds (of any run)

    def records(self, run_dir: Path) -> BatchRecords:
        return BatchRecords(run_dir, self.engine)

    @abstractmethod
    def lost_nodes(self, lost: list[str], jobs: list[JobRecord], cancelled: bool) -> list[Event]:
        """The `end` events of nodes the journal shows running whose jobs the scheduler no longer holds."""

    @abstractmethod
    def waiting_state(self, job: Q) -> tuple[str, str | None] | None:
        """How a queued job's node shows before its wrapper journals it: (state, why), or None once it runs."""

    def queued_nodes(self, jobs: list[JobRecord]) -> dict[str, Q]:
        """Nodes of these jobs that the scheduler still holds -> their queue entry."""
        by_job = {record.job: record for record in jobs}
        queued: dict[str, Q] = {}
        for job in self.queued_jobs():
            record = by_job.get(job.job_id)
            if record is None:
                continue
            node = record.tasks.get(-1 if job.task is None else job.task)
            if node is not None:
                queued[node] = job
        return queued

    def reconcile(self, layout: RunLayout, plan: Plan) -> tuple[JournalState, dict[str, Q]]:
        """Bring the journal up to date with the scheduler (the run's ingest); return it and the nodes the
        scheduler still holds. Writes only what the journal lacks: with nothing new, nothing at all."""
        records = self.records(layout.run_dir)
        sub, jobs = records.latest()
        with observe_lock(records):
            # Queue first, journal second: a node that ends in between is then still "queued", never "lost".
            queued = self.queued_nodes(jobs) if jobs else {}
            journal = read_journal(layout.journal_path)
            if journal.finished is not None:
                return journal, queued
            cancelled = records.cancelled() >= sub
            submitted = {node for record in jobs for node in record.tasks.values()}
            lost = [
                name
                for name, record in journal.nodes.items()
                if record.state in (RUNNING, RETRYING, CHECKPOINTED) and name in submitted and name not in queued
            ]
            events = (self.lost_nodes(lost, jobs, cancelled) if lost else []) + blocked_nodes(plan, journal, queued)
            for event in events:
                journal.apply(event)
            if not queued and journal.runners:
                finish = finish_event(run_state(plan, journal, cancelled=cancelled))
                events.append(finish)
                journal.apply(finish)
            append_events(layout.journal_path, events)
        return journal, queued

    def observe(self, layout: RunLayout) -> RunStatus:
        """Ingest the run (reconcile), then its status from what that found: what a waiter reads each look."""
        plan = layout.load_plan()
        return self._status(layout, plan, *self.reconcile(layout, plan))

    def read_status(self, layout: RunLayout) -> RunStatus:
        """The run's status from its journal and the scheduler's queue, writing nothing: the shared RunStatus,
        so `dagflow status` looks the same for every engine. What only the scheduler knows of jobs that left
        the queue is journaled by an ingest (reconcile) first."""
        plan = layout.load_plan()
        _, jobs = self.records(layout.run_dir).latest()
        queued = self.queued_nodes(jobs) if jobs else {}  # queue first, journal second, as reconcile reads them
        return self._status(layout, plan, read_journal(layout.journal_path), queued)

    def _status(self, layout: RunLayout, plan: Plan, journal: JournalState, queued: dict[str, Q]) -> RunStatus:
        """Nodes whose jobs wait show as waiting_state says; these are not journaled."""
        for name, job in queued.items():
            shown = self.waiting_state(job)
            if shown is None:
                continue
            # A waiting job has not started in this submission: an older record is the previous submission's.
            attempts = journal.nodes[name].attempts if name in journal.nodes else 0
            journal.nodes[name] = NodeRecord(state=shown[0], attempts=attempts, why=shown[1])
        sub, jobs = self.records(layout.run_dir).latest()
        status = RunStatus(layout, plan, journal, runner_alive=bool(queued), engine=self.engine)
        status.extra = {"submission": sub, "jobs": [record.job for record in jobs], "queued_nodes": len(queued)}
        shown = ", ".join(record.job for record in jobs[:6]) + (", ..." if len(jobs) > 6 else "")
        if jobs:
            status.notes = [f"{self.title} submission {sub}: job(s) {shown}; {len(queued)} node(s) {self.still_queued}"]
        status.resume_hint = f"dagflow run --engine {self.engine} --resume {layout.run_id}"
        return status
