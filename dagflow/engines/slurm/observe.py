"""Reading a Slurm run: what Slurm still holds (`squeue`, see commands.queued_jobs), folded into the run's journal.

The node wrapper journals every attempt's start and end itself, so the journal already holds most of a
run. What only Slurm knows is added here, as journal events, so that `dagflow status` reads one journal
for every engine:

- a node whose job left the queue while the journal shows it running never got to write its end: it was
  cancelled, hit the job's time limit, or lost its node. `scontrol show job` says which (there is no
  sacct without slurmdbd): CANCELLED is `interrupted`, anything else `failed`.
- a node that never started and whose job is gone, below a failed node: Slurm cancelled it
  (`kill_invalid_depend`), so it is `upstream_failed`, as the local engine journals it.
- once nothing of the latest submission is queued, a `finish` event with the run's state.

The run counts as running (the status view's "runner alive") while Slurm holds any of its jobs.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dagflow.engines.slurm import commands
from dagflow.engines.slurm.records import JobRecord, SlurmRecords
from dagflow.plan import Plan
from dagflow.run.journal import (
    CHECKPOINTED,
    DONE_STATES,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalState,
    NodeRecord,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.status import HELD, QUEUED, RunStatus

# Slurm job states a node's job can end in without the wrapper journaling it, and what they mean.
_SLURM_END = {
    "TIMEOUT": "hit the Slurm time limit",
    "OUT_OF_MEMORY": "ran out of memory (Slurm)",
    "NODE_FAIL": "its Slurm node failed",
    "PREEMPTED": "preempted by Slurm",
    "BOOT_FAIL": "its Slurm node failed to boot",
    "DEADLINE": "missed its Slurm deadline",
    "FAILED": "the batch job failed before the node ended",
}


def is_slurm_run(layout: RunLayout) -> bool:
    return SlurmRecords(layout.run_dir).exists()


@contextmanager
def _observe_lock(records: SlurmRecords) -> Iterator[None]:
    """One observer writes reconciliation events at a time (two `dagflow status` calls, say)."""
    fd = os.open(records.dir / "observe.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def append_events(journal: Path, events: list[dict[str, object]]) -> None:
    if not events:
        return
    now = round(time.time(), 3)
    data = "".join(json.dumps({**event, "t": now}, separators=(",", ":")) + "\n" for event in events)
    fd = os.open(journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data.encode())
        os.fdatasync(fd)
    finally:
        os.close(fd)


def queued_nodes(jobs: list[JobRecord]) -> dict[str, commands.QueuedJob]:
    """Nodes of these jobs that Slurm still holds -> their squeue entry."""
    by_job = {record.job: record for record in jobs}
    queued: dict[str, commands.QueuedJob] = {}
    for job in commands.queued_jobs():
        record = by_job.get(job.job_id)
        if record is None:
            continue
        node = record.tasks.get(-1 if job.task is None else job.task)
        if node is not None:
            queued[node] = job
    return queued


def reconcile(layout: RunLayout, plan: Plan) -> tuple[JournalState, dict[str, commands.QueuedJob]]:
    """Bring the journal up to date with Slurm; return it and the nodes Slurm still holds."""
    records = SlurmRecords(layout.run_dir)
    sub, jobs = records.latest()
    with _observe_lock(records):
        # Queue first, journal second: a node that ends in between is then still "queued", never "lost".
        queued = queued_nodes(jobs) if jobs else {}
        journal = read_journal(layout.journal_path)
        if journal.finished is not None:
            return journal, queued
        events = _lost_nodes(journal, jobs, queued) + _blocked_nodes(plan, journal, queued)
        for event in events:
            journal.apply(event)
        if not queued and journal.runners:
            state = _run_state(plan, journal, cancelled=records.cancelled() >= sub)
            finish = {"e": "finish", "s": state}
            events.append(finish)
            journal.apply(finish)
        append_events(layout.journal_path, events)
    return journal, queued


def _lost_nodes(
    journal: JournalState, jobs: list[JobRecord], queued: dict[str, commands.QueuedJob]
) -> list[dict[str, object]]:
    refs = {node: record.ref(task) for record in jobs for task, node in record.tasks.items()}
    lost = [
        name
        for name, record in journal.nodes.items()
        if record.state in (RUNNING, RETRYING, CHECKPOINTED) and name in refs and name not in queued
    ]
    if not lost:
        return []
    states = commands.job_states([refs[name] for name in lost])
    events: list[dict[str, object]] = []
    for name in lost:
        slurm_state, _ = states.get(refs[name], ("", ""))
        slurm_state = slurm_state.split("+")[0]
        if slurm_state in ("CANCELLED", "") or slurm_state not in _SLURM_END:
            why = "cancelled" if slurm_state == "CANCELLED" else "its Slurm job ended without a result"
            events.append({"e": "end", "n": name, "s": INTERRUPTED, "why": why})
        else:
            events.append({"e": "end", "n": name, "s": FAILED, "why": _SLURM_END[slurm_state]})
    return events


def _blocked_nodes(plan: Plan, journal: JournalState, queued: dict[str, commands.QueuedJob]) -> list[dict[str, object]]:
    """Never-started nodes below a failed node whose jobs Slurm no longer holds."""
    states = {name: record.state for name, record in journal.nodes.items()}
    blocked_by: dict[str, list[str]] = {}
    culprit: dict[str, str] = {}  # node -> the failed node it is below (or is)
    for name, node in plan.nodes.items():  # topological: parents are settled first
        state = states.get(name, PENDING)
        if state == FAILED:
            culprit[name] = name
            continue
        by = next((culprit[parent] for parent in node.parents if parent in culprit), None)
        if by is None:
            continue
        if state == UPSTREAM_FAILED:
            culprit[name] = by
        elif state == PENDING and name not in queued:
            culprit[name] = by
            blocked_by.setdefault(by, []).append(name)
    return [{"e": "upstream_failed", "n": names, "by": by} for by, names in blocked_by.items()]


def _run_state(plan: Plan, journal: JournalState, cancelled: bool) -> str:
    states = [journal.nodes[name].state if name in journal.nodes else PENDING for name in plan.nodes]
    if all(state in DONE_STATES for state in states):
        return SUCCEEDED
    if cancelled or any(state in (INTERRUPTED, PENDING) for state in states):
        return INTERRUPTED
    return FAILED if any(state in (FAILED, UPSTREAM_FAILED) for state in states) else INTERRUPTED


_HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")


def read_slurm_status(layout: RunLayout) -> RunStatus:
    """The run's status after reconciling with Slurm: the shared RunStatus, so `dagflow status` looks the
    same for every engine. Nodes whose jobs wait in Slurm's queue show as `pending` while their parents
    run (Dependency), `held` when held, else `queued` (waiting for resources); these are not journaled."""
    plan = layout.load_plan()
    journal, queued = reconcile(layout, plan)
    for name, job in queued.items():
        if job.state != "PENDING":
            continue
        # A pending job has not started in this submission: an older record is the previous submission's.
        attempts = journal.nodes[name].attempts if name in journal.nodes else 0
        state = PENDING if job.reason == "Dependency" else HELD if job.reason in _HELD_REASONS else QUEUED
        journal.nodes[name] = NodeRecord(state=state, attempts=attempts, why=None if state == PENDING else job.reason)
    sub, jobs = SlurmRecords(layout.run_dir).latest()
    status = RunStatus(layout, plan, journal, runner_alive=bool(queued), engine="slurm")
    status.extra = {"submission": sub, "jobs": [record.job for record in jobs], "queued_nodes": len(queued)}
    shown = ", ".join(record.job for record in jobs[:6]) + (", ..." if len(jobs) > 6 else "")
    if jobs:
        status.notes = [f"Slurm submission {sub}: job(s) {shown}; {len(queued)} node(s) still in Slurm's queue"]
    status.resume_hint = f"dagflow run --engine slurm --resume {layout.run_id}"
    return status
