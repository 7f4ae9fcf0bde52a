"""A condor run's ingest: what DAGMan and the jobs wrote since the last one, folded into the run directory.

`dagflow status` reads a condor run without writing (observe.py). What only DAGMan's files and the jobs'
output hold is brought into the run directory here, by whoever waits on the run (`dagflow run`, the status
warmer, the search scheduler) and by `dagflow status` before it reads, where it may write:

- the plan's index, when plan.json changed since it was kept;
- the usage of every job segment that ended (usage.jsonl, usage_records.py);
- the verdict of each promotion node that ended (verdicts.py);
- the run's journal (run/journal.py, the one appender): a `run` event per DAGMan submission, each node's
  attempts' `start` and `end`, `upstream_failed` and, once DAGMan is gone, `finish`, each at the time the
  files say it happened; what the journal already says is not written again;
- once DAGMan is gone, the status itself, both views (status_cache.py).

It is repeatable and idempotent: files that did not change since the status was kept are not read at all,
and an ingest that finds nothing new writes nothing.
"""

from __future__ import annotations

import os
import sys
from itertools import accumulate
from pathlib import Path
from typing import Any

from dagflow.engines.condor import status_cache as cache
from dagflow.engines.condor.observe import (
    build_status,
    condor_record,
    event_log_path,
    read_condor_status,
    status_key,
)
from dagflow.engines.condor.records import CondorRecord, condor_dir
from dagflow.engines.condor.usage_records import record_condor_usage
from dagflow.engines.condor.verdicts import record_verdicts_seen
from dagflow.plan.index import PlanIndex
from dagflow.run.journal import (
    FAILED,
    INTERRUPTED,
    RETRY,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    Event,
    NodeRecord,
    append_events,
    end_event,
    finish_event,
    read_journal,
    run_event,
    start_event,
    upstream_failed_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.status import RecordColumns, RunStatus, load_plan_index

_ENDED = (SUCCEEDED, FAILED, RETRYING, INTERRUPTED)  # the fold's states an `end` event journals


def ingest_condor(layout: RunLayout) -> RunStatus | None:
    """Ingest the run (the module docstring); the status it read, or None when nothing changed since the
    status was kept."""
    record = condor_record(layout)
    directory = condor_dir(layout.run_dir)
    if cache.read_status(directory, status_key(layout, record)) is not None:
        return None
    index = load_plan_index(layout, keep=True)
    try:
        record_condor_usage(layout.run_dir, index, event_log_path(layout))
    except ValueError as error:  # a log the bindings cannot read: usage stays unrecorded, the rest goes on
        print(f"dagflow: usage of run {layout.run_id} not recorded: {error}", file=sys.stderr)
    key = status_key(layout, record)  # with usage.jsonl as recorded
    status = build_status(layout, record, index, key)
    records = status.journal.nodes
    record_verdicts_seen(layout, index, records)  # before a final status is kept: the summary reads them
    append_events(layout.journal_path, journal_events(layout, index, record, status))
    if not status.runner_alive:  # a live DAG's status changes anyway (and asks the schedd): not kept
        _keep(directory, key, status)
    return status


def observe_condor(layout: RunLayout) -> RunStatus:
    """Ingest the run, then its status: what a waiter on the run reads each time it looks."""
    return ingest_condor(layout) or read_condor_status(layout)


def journal_events(layout: RunLayout, index: PlanIndex, record: CondorRecord, status: RunStatus) -> list[Event]:
    """The events that bring the run's journal to what the status says, in order."""
    journal = read_journal(layout.journal_path)
    events = [
        run_event(sub > 1, engine="condor", sub=sub, t=record.submissions[sub - 1].t)
        for sub in range(journal.runners + 1, len(record.submissions) + 1)
    ]
    records = status.journal.nodes
    rows = records.rows() if isinstance(records, RecordColumns) else {}
    blocked: list[str] = []
    for name, (state, attempts, rc, why, started, ended, _) in rows.items():
        had = journal.nodes.get(name) or NodeRecord()
        if state == UPSTREAM_FAILED:
            if had.state != UPSTREAM_FAILED:
                blocked.append(name)
        else:
            events += _node_events(name, had, state, attempts, rc, why, started, ended)
    if blocked:
        events.append(upstream_failed_event(blocked, _failed_above(index, rows, blocked[0])))
    finished = status.journal.finished
    if not status.runner_alive and finished is not None and (events or journal.finished != finished):
        events.append(finish_event(finished, t=status.journal.finished_at))
    return events


def _node_events(
    name: str, had: NodeRecord, state: str, attempts: int, rc: int | None, why: str | None,
    started: float | None, ended: float | None,
) -> list[Event]:  # fmt: skip
    """A node's attempts the journal lacks (their starts; each but the last one ended in a retry), and how
    its latest one ended, when that is new."""
    if state != RUNNING and state not in _ENDED:
        return []  # pending, queued, held: what the journal does not hold
    events: list[Event] = []
    for attempt in range(had.attempts + 1, attempts + 1):
        events.append(start_event(name, attempt, t=started))
        if attempt < attempts:
            events.append(end_event(name, RETRY, attempt=attempt, t=started))
    if state == RUNNING:
        return events
    if events or had.state != state or had.rc != rc or had.why != why:
        end = RETRY if state == RETRYING else state
        events.append(end_event(name, end, attempt=attempts or None, rc=rc, why=why, t=ended))
    return events


def _failed_above(index: PlanIndex, rows: dict[str, tuple[Any, ...]], name: str) -> str:
    """A failed ancestor of an upstream-failed node (what its journal line names)."""
    position = index.position
    starts = list(accumulate(index.parent_counts, initial=0))
    at = position[name]
    while True:
        parents = [index.names[parent] for parent in index.parent_list[starts[at] : starts[at + 1]]]
        for parent in parents:
            if (rows.get(parent) or (None,))[0] == FAILED:
                return parent
        above = [parent for parent in parents if (rows.get(parent) or (None,))[0] == UPSTREAM_FAILED]
        if not above:
            return parents[0] if parents else name
        at = position[above[0]]


def _keep(directory: Path, key: dict[str, Any], status: RunStatus) -> None:
    """Keep both views of an ended run's status (status_cache.py), the text of `status --json`'s nodes too."""
    index = status.index
    summary = status.summarize()
    shown = summary.shown()
    usage = status.usage(shown)
    summary.usage = {name: usage.get(name) for name in shown}
    journal = status.journal
    facts = {
        "pipeline": index.pipeline,
        "overrides": index.overrides,
        "total": len(index),
        "runners": journal.runners,
        "started": journal.started,
        "finished": journal.finished,
        "finished_at": journal.finished_at,
        "extra": status.extra,
        "notes": status.notes,
        "resume_hint": status.resume_hint,
    }
    columns = journal.nodes._loaded()  # type: ignore[attr-defined]
    cache.write_status(directory, key, facts, summary, columns, index.position)
    status.json_nodes = cache.NodesText(directory, key, writable=True)
    with open(os.devnull, "wb") as sink:
        status.write_json(sink)
    status.json_nodes = cache.NodesText(directory, key)
