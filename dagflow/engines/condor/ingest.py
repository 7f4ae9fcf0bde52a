"""A condor run's ingest: what DAGMan and the jobs wrote since the last one, folded into the run directory.

`dagflow status` reads a condor run as it reads every engine's, from the run directory and without
writing (run/status.py). What only DAGMan's files and the jobs' output hold (observe.py) is brought into
it here, by whoever waits on the run (`dagflow run`, the status warmer, the search scheduler) and by
`dagflow status` before it reads, where it may write:

- the plan's index, when plan.json changed since it was kept;
- the usage of every job segment that ended (usage.jsonl, usage_records.py);
- the verdict of each promotion node that ended (verdicts.py);
- the run's journal (run/journal.py, the one appender): a `run` event per DAGMan submission, each node's
  attempts' `start` and `end`, `upstream_failed` and, once DAGMan is gone, `finish`, each at the time the
  files say it happened; what the journal already says is not written again;
- what the journal cannot say, in the run's observed record (run/observed.py): whether DAGMan is alive,
  the nodes whose jobs wait or are held (and why), the DAGMan job's facts and notes.

It is repeatable and idempotent: once DAGMan is gone, files that did not change since the last ingest
(their marks, the record's key) are not read at all, and an ingest that finds nothing new writes nothing.
Two ingests of one run (a status beside the status warmer) take turns.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import accumulate
from pathlib import Path
from typing import Any

from dagflow.engines.condor.observe import condor_record, event_log_path, observe_files
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
    JournalState,
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
from dagflow.run.observed import Observed, read_observed, record_row
from dagflow.run.status import RunStatus, load_plan_index, read_status
from dagflow.run.usage import usage_path

_ENDED = (SUCCEEDED, FAILED, RETRYING, INTERRUPTED)  # the fold's states an `end` event journals


def ingest_condor(layout: RunLayout) -> bool:
    """Ingest the run (the module docstring); whether anything was new."""
    record = condor_record(layout)
    with _one_ingest(layout):
        kept = read_observed(layout.run_dir)
        if kept is not None and not kept.alive and kept.key == files_key(layout, record):
            return False
        index = load_plan_index(layout, keep=True)
        try:
            record_condor_usage(layout.run_dir, index, event_log_path(layout))
        except ValueError as error:  # a log the bindings cannot read: usage stays unrecorded, the rest goes on
            print(f"dagflow: usage of run {layout.run_id} not recorded: {error}", file=sys.stderr)
        key = files_key(layout, record)  # with usage.jsonl as recorded
        seen = observe_files(layout, record, index)
        record_verdicts_seen(layout, index, seen.nodes)
        journal = read_journal(layout.journal_path)
        events = journal_events(index, record, journal, seen)
        now = round(time.time(), 3)
        for event in events:  # stamped here, not by the appender: the journal folded below is the one on disk
            event.setdefault("t", now)
            journal.apply(event)
        append_events(layout.journal_path, events)
        seen.key, seen.nodes = key, _told_otherwise(seen.nodes, journal)
        seen.write(layout.run_dir)
    return True


def observe_condor(layout: RunLayout) -> RunStatus:
    """Ingest the run, then read its status: what a waiter on the run reads each time it looks."""
    ingest_condor(layout)
    return read_status(layout, index=True)


def status_now(layout: RunLayout) -> RunStatus:
    """The run as DAGMan's files say now, writing nothing (whether it is live, for the live-run rule): the
    run directory's status when its last ingest read these very files, else theirs, read here."""
    record = condor_record(layout)
    kept = read_observed(layout.run_dir)
    if kept is not None and kept.key == files_key(layout, record):
        return read_status(layout, index=True)
    index = load_plan_index(layout)
    seen = observe_files(layout, record, index)
    journal = JournalState(seen.nodes, len(record.submissions), seen.started, seen.finished, seen.finished_at)
    return RunStatus(layout, index, journal, seen.alive, engine="condor")


def files_key(layout: RunLayout, record: CondorRecord) -> dict[str, Any]:
    """What tells that the files an ingest reads changed: the run, the local time zone and year (the event
    log's times are local, and an old-style `MM/DD` one has no year), and each file's mark."""
    files = record.files
    inputs = {
        "plan": layout.plan_path,
        "run": CondorRecord.path(layout.run_dir),
        "status": files.node_status,
        "jobstate": files.jobstate_log,
        "events": event_log_path(layout),
        "dagman_log": record.dagman_log,
        "dagman_out": record.dagman_out,
        "usage": usage_path(layout.run_dir),
    }
    zone = [time.timezone, time.altzone, time.daylight, *time.tzname, time.localtime().tm_year]
    marks = {name: _file_mark(path) for name, path in inputs.items()}
    return {"run": layout.run_id, "dag": record.dag, "zone": zone, "files": marks}


def _file_mark(path: Path) -> list[int] | None:
    """A file's inode, size and modification time; None when it is missing. Not its change time: a
    `chmod -R a-w` of the run directory changes nothing an ingest reads."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


@contextmanager
def _one_ingest(layout: RunLayout) -> Iterator[None]:
    """One ingest of the run at a time: a lock on its condor/ directory itself (no file to create)."""
    fd = os.open(condor_dir(layout.run_dir), os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _told_otherwise(records: dict[str, NodeRecord], journal: JournalState) -> dict[str, NodeRecord]:
    """The records DAGMan's files give that the journal does not (a waiting or held job, a reason the
    journal's events do not carry), and a default one for each node the journal has and the files do not."""
    default = NodeRecord()
    told = {
        name: record
        for name, record in records.items()
        if record_row(record) != record_row(journal.nodes.get(name) or default)
    }
    told.update((name, default) for name in journal.nodes.keys() - records.keys())
    return told


def journal_events(index: PlanIndex, record: CondorRecord, journal: JournalState, seen: Observed) -> list[Event]:
    """The events that bring the journal to what DAGMan's files say (`seen`), in order."""
    events = [
        run_event(sub > 1, engine="condor", sub=sub, t=record.submissions[sub - 1].t)
        for sub in range(journal.runners + 1, len(record.submissions) + 1)
    ]
    records = seen.nodes
    blocked: dict[str, list[str]] = {}  # failed ancestor -> the nodes newly upstream-failed below it
    for name, node in records.items():
        had = journal.nodes.get(name) or NodeRecord()
        if node.state == UPSTREAM_FAILED:
            if had.state != UPSTREAM_FAILED:
                blocked.setdefault(_failed_above(index, records, name), []).append(name)
        else:
            events += _node_events(name, had, node)
    events += [upstream_failed_event(names, by) for by, names in blocked.items()]
    finished = seen.finished
    if not seen.alive and finished is not None and (events or journal.finished != finished):
        events.append(finish_event(finished, t=seen.finished_at))
    return events


def _node_events(name: str, had: NodeRecord, node: NodeRecord) -> list[Event]:
    """A node's attempts the journal lacks (their starts; each but the last one ended in a retry), and how
    its latest one ended, when that is new."""
    state, attempts, rc, why, started, ended = node.state, node.attempts, node.rc, node.why, node.started, node.ended
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


def _failed_above(index: PlanIndex, records: dict[str, NodeRecord], name: str) -> str:
    """A failed ancestor of an upstream-failed node (what its journal line names)."""
    position = index.position
    starts = list(accumulate(index.parent_counts, initial=0))
    at = position[name]

    def state(node: str) -> str | None:
        found = records.get(node)
        return None if found is None else found.state

    while True:
        parents = [index.names[parent] for parent in index.parent_list[starts[at] : starts[at + 1]]]
        for parent in parents:
            if state(parent) == FAILED:
                return parent
        above = [parent for parent in parents if state(parent) == UPSTREAM_FAILED]
        if not above:
            return parents[0] if parents else name
        at = position[above[0]]
