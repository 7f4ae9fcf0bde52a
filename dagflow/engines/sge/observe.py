"""Reading a Grid Engine run: what `qstat -xml` still holds, folded into the run's journal.

The node wrapper journals every attempt's start and end, and `upstream_failed` for a node below a failure
(it checks its parents before running), so the journal holds most of a run. What only Grid Engine knows
is added here as journal events, so that `dagflow status` reads one journal for every engine:

- a node whose job left the queue while the journal shows it running never wrote its end: it was
  deleted (`dagflow cancel`: interrupted) or killed by Grid Engine (`h_rt`, its host: failed). qacct
  would say which, but lags up to 15 s behind a job's end, so the cancel record decides.
- a never-started node below a failed one whose job is gone (its script failed before the wrapper ran):
  upstream_failed, as the local engine journals it.
- once nothing of the latest submission is queued, a `finish` event with the run's state.

The run counts as running (the status view's "runner alive") while Grid Engine holds any of its jobs.
"""

from __future__ import annotations

from dagflow.engines.sge import commands
from dagflow.engines.sge.records import JobRecord, SgeRecords
from dagflow.engines.slurm.observe import _blocked_nodes, _observe_lock, _run_state, append_events
from dagflow.plan import Plan
from dagflow.run.journal import (
    CHECKPOINTED,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    RUNNING,
    JournalState,
    NodeRecord,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.status import HELD, QUEUED, RunStatus

__all__ = ["append_events", "is_sge_run", "queued_nodes", "read_sge_status", "reconcile"]

KILLED = "its Grid Engine job ended without a result (h_rt, memory, or its host)"


def is_sge_run(layout: RunLayout) -> bool:
    return SgeRecords(layout.run_dir).exists()


def queued_nodes(jobs: list[JobRecord]) -> dict[str, commands.QueuedJob]:
    """Nodes of these jobs that Grid Engine still holds -> their qstat entry."""
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
    """Bring the journal up to date with Grid Engine; return it and the nodes Grid Engine still holds."""
    records = SgeRecords(layout.run_dir)
    sub, jobs = records.latest()
    with _observe_lock(records):
        # Queue first, journal second: a node that ends in between is then still "queued", never "lost".
        queued = queued_nodes(jobs) if jobs else {}
        journal = read_journal(layout.journal_path)
        if journal.finished is not None:
            return journal, queued
        cancelled = records.cancelled() >= sub
        events = _lost_nodes(journal, jobs, queued, cancelled) + _blocked_nodes(plan, journal, queued)  # type: ignore[arg-type]
        for event in events:
            journal.apply(event)
        if not queued and journal.runners:
            finish = {"e": "finish", "s": _run_state(plan, journal, cancelled=cancelled)}
            events.append(finish)
            journal.apply(finish)
        append_events(layout.journal_path, events)
    return journal, queued


def _lost_nodes(
    journal: JournalState, jobs: list[JobRecord], queued: dict[str, commands.QueuedJob], cancelled: bool
) -> list[dict[str, object]]:
    submitted = {node for record in jobs for node in record.tasks.values()}
    lost = [
        name
        for name, record in journal.nodes.items()
        if record.state in (RUNNING, RETRYING, CHECKPOINTED) and name in submitted and name not in queued
    ]
    if cancelled:
        return [{"e": "end", "n": name, "s": INTERRUPTED, "why": "cancelled"} for name in lost]
    return [{"e": "end", "n": name, "s": FAILED, "why": KILLED} for name in lost]


def _queued_state(job: commands.QueuedJob) -> tuple[str, str | None] | None:
    """How a queued job's node shows before its wrapper journals it: (state, why), or None once it runs."""
    if "E" in job.state:
        return HELD, f"Grid Engine error state ({job.state}); `qstat -j {job.job_id}` says why"
    if "qw" not in job.state:
        return None  # r, t (transferring), d (being deleted): the journal says the rest
    if "h" in job.state:
        return PENDING, None  # held until its parents' jobs end (-hold_jid)
    return QUEUED, "waiting for a slot"


def read_sge_status(layout: RunLayout) -> RunStatus:
    """The run's status after reconciling with Grid Engine: the shared RunStatus, so `dagflow status` looks
    the same for every engine. Nodes whose jobs wait show as `pending` while held for their parents,
    `queued` while waiting for resources and `held` in Grid Engine's error state; these are not journaled."""
    plan = layout.load_plan()
    journal, queued = reconcile(layout, plan)
    for name, job in queued.items():
        shown = _queued_state(job)
        if shown is None:
            continue
        # A waiting job has not started in this submission: an older record is the previous submission's.
        attempts = journal.nodes[name].attempts if name in journal.nodes else 0
        journal.nodes[name] = NodeRecord(state=shown[0], attempts=attempts, why=shown[1])
    sub, jobs = SgeRecords(layout.run_dir).latest()
    status = RunStatus(layout, plan, journal, runner_alive=bool(queued), engine="sge")
    status.extra = {"submission": sub, "jobs": [record.job for record in jobs], "queued_nodes": len(queued)}
    shown_jobs = ", ".join(record.job for record in jobs[:6]) + (", ..." if len(jobs) > 6 else "")
    if jobs:
        status.notes = [f"Grid Engine submission {sub}: job(s) {shown_jobs}; {len(queued)} node(s) still queued"]
    status.resume_hint = f"dagflow run --engine sge --resume {layout.run_id}"
    return status
