"""The durable, append-only journal of node state transitions (`journal.jsonl`, one JSON object a line).

Every engine's events are built by the constructors below and appended here, nowhere else. Each line is
compact JSON (no spaces, non-ASCII escaped), with short keys because a big run writes two per node, in
this order, the wall time `t` (seconds, to the millisecond) always last; a key shown in [] is left out
when it has no value:

    {"e": "run", ["pid": runner pid], ["engine": batch engine, "sub": submission], "resume": bool, "t"}
                                                      a runner started on this run, or a batch submission
    {"e": "start", "n": node, "a": attempt, ["pid": its pid], ["job": its batch job id], "t"}
    {"e": "end", "n": node, ["a": attempt], "s": state, ["rc": code], ["why": text], ["k": cache key], "t"}
                        no attempt or code: a batch scheduler, not the node's wrapper, says how it ended
    {"e": "cached", "n": node, "k": cache key, "t"}      skipped: unchanged since it last ran
    {"e": "upstream_failed", "n": [nodes], "by": node, "t"}
    {"e": "replan", "n": [nodes], "t"}   the pipeline changed before a resume: these nodes changed with
                                         it and are pending again; a process of theirs started before it
                                         is stale (`JournalState.replanned`)
    {"e": "finish", "s": run state, "t"}

A later runner tells the node's process (`pid`) from an unrelated one that reused its pid by the
process's environment (procs.py). Journals written before that also hold `st`, the process start time in
clock ticks; it is still read, and no longer used. An "end" state is succeeded, failed, interrupted,
retry (the node will start again) or checkpointed (it exited with its step's checkpoint exit code: it
starts again from its checkpoint, and that is no failed attempt).

Durability. Two writers append, both with O_APPEND and one write(2) per batch of events:
- the local runner and a job executor's driver hold the journal open (`JournalWriter`). The events of one
  turn of its loop are written together before it waits again (`JournalWriter.commit`), so a runner killed
  with SIGKILL loses at most the events of the turn it was in; nothing of them is lost for good: node starts
  and exits are also in the keeper's `procs.jsonl` (or the executor's record of each job, found by its key),
  which the next runner reads, and cached or upstream-failed nodes are found again. Terminal events are
  also fdatasync'ed, at most once per 50 ms, so a crash of the machine loses at most the last 50-odd
  milliseconds of them (those nodes rerun).
- a process that writes a few events and may share the journal with others at once (a batch node's
  wrapper, a batch engine's submit and status) appends them with `append_events`, fdatasync'ed before
  it returns when durable (every event but a batch attempt's start, retry or checkpoint restart).
A torn last line (the runner died mid-write, or the disk filled up: a short write is cut off again at
once and the runner stops) is ignored on read and cut off before the next runner appends. A line that is
valid JSON but not an event of this format (a missing or mistyped field) is skipped and counted
(`JournalState.bad_lines`), never applied in part. Node processes also leave their own record, written
by the keeper process that outlives a killed runner (`procs.jsonl`, see engines/local/keeper.py).
"""

from __future__ import annotations

import errno
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.bounded import json_lines

PENDING = "pending"
RUNNING = "running"
RETRYING = "retrying"
CHECKPOINTED = "checkpointed"  # exited with its step's checkpoint exit code: runs again, not a failure
SUCCEEDED = "succeeded"
CACHED = "cached"
FAILED = "failed"
UPSTREAM_FAILED = "upstream_failed"
INTERRUPTED = "interrupted"

DONE_STATES = frozenset({SUCCEEDED, CACHED})
NODE_STATES = (PENDING, RUNNING, RETRYING, CHECKPOINTED, SUCCEEDED, CACHED, FAILED, UPSTREAM_FAILED, INTERRUPTED)

RETRY = "retry"  # an end event's state: the node starts again (it is RETRYING until then)

Event = dict[str, Any]  # one journal line, as the constructors build it and as it is read back

# The event kinds, each line's "e".
RUN_EVENT = "run"
START_EVENT = "start"
END_EVENT = "end"
CACHED_EVENT = "cached"
UPSTREAM_FAILED_EVENT = "upstream_failed"
REPLAN_EVENT = "replan"
FINISH_EVENT = "finish"


def _event(kind: str, **fields: Any) -> Event:
    """An event of this kind with these fields, in this order, leaving out those that are None."""
    return {"e": kind, **{name: value for name, value in fields.items() if value is not None}}


def run_event(
    resume: bool, *, pid: int | None = None, engine: str | None = None, sub: int | None = None, t: float | None = None
) -> Event:
    """A runner started on the run (the local one with its pid), or a batch engine submitted it (again)."""
    return _event(RUN_EVENT, pid=pid, engine=engine, sub=sub, resume=resume, t=t)


def start_event(
    node: str, attempt: int, *, pid: int | None = None, job: str | None = None, t: float | None = None
) -> Event:
    return _event(START_EVENT, n=node, a=attempt, pid=pid, job=job, t=t)


def end_event(
    node: str,
    state: str,
    *,
    attempt: int | None = None,
    rc: int | None = None,
    why: str | None = None,
    key: str | None = None,
    t: float | None = None,
) -> Event:
    """An attempt ended in `state` (one of _END_STATES); attempt and rc are None when the scheduler, not the
    node's wrapper, tells how it ended."""
    return _event(END_EVENT, n=node, a=attempt, s=state, rc=rc, why=why, k=key, t=t)


def cached_event(node: str, key: str) -> Event:
    return _event(CACHED_EVENT, n=node, k=key)


def upstream_failed_event(nodes: list[str], by: str, t: float | None = None) -> Event:
    return _event(UPSTREAM_FAILED_EVENT, n=nodes, by=by, t=t)


def replan_event(nodes: list[str]) -> Event:
    return _event(REPLAN_EVENT, n=nodes)


def finish_event(state: str, t: float | None = None) -> Event:
    return _event(FINISH_EVENT, s=state, t=t)


def is_finish_line(line: bytes) -> bool:
    """Whether a raw journal line is a finish event, without parsing it (the lines are compact JSON)."""
    return _FINISH_MARK in line


_FINISH_MARK = f'"e":"{FINISH_EVENT}"'.encode()
_TAIL_BYTES = 4096  # the finish event is one short line


def ends_with_finish(journal: Path) -> bool:
    """Whether the journal's last line is a finish event (the run settled), read from its tail alone."""
    try:
        with open(journal, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return False
    return is_finish_line(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])


_encode = json.JSONEncoder(separators=(",", ":")).encode


def _now() -> float:
    return round(time.time(), 3)


def append_events(path: Path, events: list[Event], durable: bool = True) -> None:
    """Append events with one write(2), stamped with the time now unless they carry their own (an engine's
    ingest journals what its scheduler saw, when it happened); fdatasync'ed before returning when durable.
    For a process that writes a few events and does not hold the journal open (see the header)."""
    if not events:
        return
    t = _now()
    data = "".join(_encode(event if "t" in event else {**event, "t": t}) + "\n" for event in events).encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
        if durable:
            os.fdatasync(fd)
    finally:
        os.close(fd)


@dataclass(slots=True)
class NodeRecord:
    state: str = PENDING
    attempts: int = 0
    rc: int | None = None
    why: str | None = None
    started: float | None = None  # wall time of the latest attempt's start
    ended: float | None = None
    pid: int | None = None
    key: str | None = None  # cache key of the succeeded or cached node
    restarts: int = 0  # checkpoint restarts (end events with state checkpointed)


@dataclass(slots=True)
class JournalState:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    runners: int = 0  # how many runners have worked on this run
    started: float | None = None  # wall time of the first runner
    finished: str | None = None  # the run state of the latest runner's finish event, if it wrote one
    finished_at: float | None = None
    skipped_lines: int = 0  # lines that were not valid JSON (a torn tail)
    bad_lines: int = 0  # valid JSON that is not a well-formed event (skipped)
    # nodes a replan event named since their latest start: a process of theirs that still runs, or whose
    # exit its keeper recorded, ran what the edit changed, and no runner takes it over
    replanned: set[str] = field(default_factory=set)

    def record(self, node: str) -> NodeRecord:
        record = self.nodes.get(node)
        if record is None:
            record = self.nodes[node] = NodeRecord()
        return record

    def done(self) -> set[str]:
        return {name for name, record in self.nodes.items() if record.state in DONE_STATES}

    def apply(self, event: Event) -> None:
        """Fold one event in; raises ValueError, before changing anything, when it is malformed."""
        # The two events of every node are read with exact-type checks first (a big run's journal holds
        # hundreds of thousands); any other type takes _optional's path, which says what is wrong.
        kind = event.get("e")
        if kind == START_EVENT:
            name = event.get("n")
            if type(name) is not str:
                name = _name(event)
            pid, started = event.get("pid"), event.get("t")
            if pid is not None and type(pid) is not int:
                pid = _optional(event, "pid", int)
            if type(started) is not float:
                started = _optional(event, "t", float)
            record = self.nodes.get(name)
            if record is None:
                record = self.nodes[name] = NodeRecord()
            if self.replanned:
                self.replanned.discard(name)
            if record.state != CHECKPOINTED:  # a restart from a checkpoint is the same attempt going on
                record.attempts += 1
            record.state = RUNNING
            record.started = started
            record.ended = None
            record.pid = pid
            record.rc = record.why = None
        elif kind == END_EVENT:
            name, state = event.get("n"), event.get("s")
            if type(name) is not str:
                name = _name(event)
            if state not in _END_STATES:
                raise ValueError(f"end event with state {state!r}")
            rc, why, ended, key = event.get("rc"), event.get("why"), event.get("t"), event.get("k")
            if rc is not None and type(rc) is not int:
                rc = _optional(event, "rc", int)
            if why is not None and type(why) is not str:
                why = _optional(event, "why", str)
            if type(ended) is not float:
                ended = _optional(event, "t", float)
            if key is not None and type(key) is not str:
                key = _optional(event, "k", str)
            record = self.nodes.get(name)
            if record is None:
                record = self.nodes[name] = NodeRecord()
            record.state = RETRYING if state == RETRY else state
            if state == CHECKPOINTED:
                record.restarts += 1
            record.rc, record.why, record.ended, record.key = rc, why, ended, key
        elif kind == CACHED_EVENT:
            name, key, ended = _name(event), _optional(event, "k", str), _optional(event, "t", float)
            record = self.record(name)
            record.state = CACHED
            record.key, record.ended = key, ended
        elif kind in (UPSTREAM_FAILED_EVENT, REPLAN_EVENT):
            names = event.get("n")
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise ValueError(f"{kind} event without a list of nodes")
            for name in names:
                if kind == REPLAN_EVENT:
                    self.replanned.add(name)
                    if (record := self.nodes.get(name)) is not None:
                        self.nodes[name] = NodeRecord(attempts=record.attempts, restarts=record.restarts)
                else:
                    record = self.record(name)
                    record.state = UPSTREAM_FAILED
                    record.why = f"upstream {event.get('by')} failed"
        elif kind == RUN_EVENT:
            started = _optional(event, "t", float)
            self.runners += 1
            if self.started is None:
                self.started = started
            self.finished = self.finished_at = None
        elif kind == FINISH_EVENT:
            state, at = _optional(event, "s", str), _optional(event, "t", float)
            self.finished, self.finished_at = state, at
        else:
            raise ValueError(f"unknown event {kind!r}")


_END_STATES = frozenset({SUCCEEDED, FAILED, INTERRUPTED, RETRY, CHECKPOINTED})


def _name(event: Event) -> str:
    name = event.get("n")
    if not isinstance(name, str):
        raise ValueError("event without a node name")
    return name


def _optional(event: Event, field_name: str, kind: type) -> Any:
    value = event.get(field_name)
    if value is None:
        return None
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ValueError(f"field {field_name!r} is {type(value).__name__}, not {kind.__name__}")
    return value


def read_journal(path: Path) -> JournalState:
    """Fold the journal into per-node records; a missing journal is an empty one. Each line is read as
    json.loads reads it on its own (the journal's own lines in place: bounded.json_lines)."""
    state = JournalState()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return state
    for _, event, line in json_lines(data):
        if line is not None:  # not in the journal's own form: read as json.loads reads it
            try:
                event = json.loads(line)
            except ValueError:
                state.skipped_lines += 1
                continue
        try:
            if type(event) is not dict:
                raise ValueError("not an object")
            state.apply(event)
        except ValueError:
            state.bad_lines += 1
    return state


def _cut_torn_tail(fd: int) -> None:
    size = os.fstat(fd).st_size
    if size == 0:
        return
    # Read back far enough to find the last newline; a torn line is short, but be safe.
    chunk = min(size, 1 << 20)
    tail = os.pread(fd, chunk, size - chunk)
    if tail.endswith(b"\n"):
        return
    cut = tail.rfind(b"\n")
    os.ftruncate(fd, size - chunk + cut + 1 if cut >= 0 else size - chunk)


class JournalWriter:
    """Appends events to the journal and makes terminal ones durable without a sync per event.

    Events are buffered and written by `commit()` (or `flush()`) with one write(2): the runner calls
    it once per turn of its loop, before it waits. A short write (a full disk) is cut off again at once
    and raises OSError, so the journal never holds a torn line that a later event could follow.
    Terminal events are made durable by `commit()`, which fdatasyncs at most once per `sync_interval_s`
    and otherwise says when the next sync is due, so that the caller's event loop wakes up for it.
    A crash of the machine therefore loses at most the last interval's terminal events (those nodes
    rerun). Syncing inline, not from a thread, is deliberate: a syncer thread made the runner and it
    trade the GIL at every write, which cost more than the syncs (fdatasync takes ~0.2 ms here).
    """

    def __init__(self, path: Path, sync_interval_s: float = 0.05) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        _cut_torn_tail(self._fd)
        self._size = os.fstat(self._fd).st_size
        self._interval = sync_interval_s
        self._dirty = False
        self._last_sync = -sync_interval_s
        self._pending: list[str] = []

    def write(self, event: Event, durable: bool = False) -> None:
        """Queue an event; `commit()` or `flush()` writes it."""
        event.setdefault("t", _now())
        self._pending.append(_encode(event))
        if durable:
            self._dirty = True

    def write_pending(self) -> None:
        """Write the queued events with one write(2)."""
        if not self._pending:
            return
        data = ("\n".join(self._pending) + "\n").encode()
        self._pending.clear()
        try:
            written = os.write(self._fd, data)
        except OSError:
            os.ftruncate(self._fd, self._size)  # a write that failed may still have written part
            raise
        if written != len(data):  # a full disk (or file size limit) took part of it: cut it off again
            os.ftruncate(self._fd, self._size)
            raise OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (journal write cut short)")
        self._size += written

    def commit(self) -> float | None:
        """Write the queued events, and sync the terminal ones unless the last sync was under an
        interval ago.

        Returns None when nothing waits to be synced, else the seconds until commit() should be
        called again to sync it.
        """
        self.write_pending()
        if not self._dirty:
            return None
        now = time.monotonic()
        due = self._last_sync + self._interval
        if now < due:
            return due - now
        self._sync(now)
        return None

    def flush(self) -> None:
        """Write the queued events and sync now whatever terminal events are not on disk yet."""
        self.write_pending()
        if self._dirty:
            self._sync(time.monotonic())

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1

    def _sync(self, now: float) -> None:
        self._dirty = False
        self._last_sync = now
        os.fdatasync(self._fd)
