"""The durable, append-only journal of node state transitions (`journal.jsonl`, one JSON object a line).

Events, with short keys because a big run writes two per node:

    {"e": "run", "t": wall, "pid": runner pid, "resume": bool}          a runner started on this run
    {"e": "start", "n": node, "a": attempt, "pid": pid, "t": wall}
    {"e": "end", "n": node, "a": attempt, "s": state, "rc": code, "why": text, "k": cache key, "t": wall}
    {"e": "cached", "n": node, "k": cache key, "t": wall}               skipped: unchanged since it last ran
    {"e": "upstream_failed", "n": [nodes], "by": node, "t": wall}
    {"e": "finish", "s": run state, "t": wall}

A later runner tells the node's process (`pid`) from an unrelated one that reused its pid by the
process's environment (procs.py). Journals written before that also hold `st`, the process start time
in clock ticks; it is still read, and no longer used. An "end" state is succeeded, failed,
interrupted, or retry (the node will start again). Every event is written with one write(2) as soon as
it happens, so a runner killed with SIGKILL loses nothing that it wrote; terminal events are also
fdatasync'ed, at most once per 50 ms (`JournalWriter.commit`), so a crash of the machine loses at most
the last 50-odd milliseconds of them (those nodes rerun).
A torn last line (the runner died mid-write) is ignored on read and cut off before the next runner
appends.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PENDING = "pending"
RUNNING = "running"
RETRYING = "retrying"
SUCCEEDED = "succeeded"
CACHED = "cached"
FAILED = "failed"
UPSTREAM_FAILED = "upstream_failed"
INTERRUPTED = "interrupted"

DONE_STATES = frozenset({SUCCEEDED, CACHED})
NODE_STATES = (PENDING, RUNNING, RETRYING, SUCCEEDED, CACHED, FAILED, UPSTREAM_FAILED, INTERRUPTED)


@dataclass(slots=True)
class NodeRecord:
    state: str = PENDING
    attempts: int = 0
    rc: int | None = None
    why: str | None = None
    started: float | None = None  # wall time of the latest attempt's start
    ended: float | None = None
    pid: int | None = None
    start_ticks: int | None = None
    key: str | None = None  # cache key of the succeeded or cached node


@dataclass(slots=True)
class JournalState:
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    runners: int = 0  # how many runners have worked on this run
    started: float | None = None  # wall time of the first runner
    finished: str | None = None  # the run state of the latest runner's finish event, if it wrote one
    finished_at: float | None = None
    skipped_lines: int = 0  # lines that were not valid JSON (a torn tail)

    def record(self, node: str) -> NodeRecord:
        record = self.nodes.get(node)
        if record is None:
            record = self.nodes[node] = NodeRecord()
        return record

    def done(self) -> set[str]:
        return {name for name, record in self.nodes.items() if record.state in DONE_STATES}

    def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("e")
        if kind == "start":
            record = self.record(event["n"])
            record.state = RUNNING
            record.attempts += 1
            record.started = event.get("t")
            record.ended = None
            record.pid = event.get("pid")
            record.start_ticks = event.get("st")
            record.rc = record.why = None
        elif kind == "end":
            record = self.record(event["n"])
            state = event["s"]
            record.state = RETRYING if state == "retry" else state
            record.rc = event.get("rc")
            record.why = event.get("why")
            record.ended = event.get("t")
            record.key = event.get("k")
        elif kind == "cached":
            record = self.record(event["n"])
            record.state = CACHED
            record.key = event.get("k")
            record.ended = event.get("t")
        elif kind == "upstream_failed":
            for name in event["n"]:
                record = self.record(name)
                record.state = UPSTREAM_FAILED
                record.why = f"upstream {event.get('by')} failed"
        elif kind == "run":
            self.runners += 1
            if self.started is None:
                self.started = event.get("t")
            self.finished = self.finished_at = None
        elif kind == "finish":
            self.finished = event.get("s")
            self.finished_at = event.get("t")


def read_journal(path: Path) -> JournalState:
    """Fold the journal into per-node records; a missing journal is an empty one."""
    state = JournalState()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return state
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            state.skipped_lines += 1
            continue
        if isinstance(event, dict):
            state.apply(event)
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

    Every event is written at once with one write(2), so a SIGKILLed runner loses nothing it wrote.
    Terminal events are made durable by `commit()`, which fdatasyncs at most once per `sync_interval_s`
    and otherwise says when the next sync is due, so that the caller's event loop wakes up for it.
    A crash of the machine therefore loses at most the last interval's terminal events (those nodes
    rerun). Syncing inline, not from a thread, is deliberate: a syncer thread made the runner and it
    trade the GIL at every write, which cost more than the syncs (fdatasync takes ~0.2 ms here).
    """

    def __init__(self, path: Path, sync_interval_s: float = 0.05) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        _cut_torn_tail(self._fd)
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        self._interval = sync_interval_s
        self._dirty = False
        self._last_sync = -sync_interval_s

    def write(self, event: dict[str, Any], durable: bool = False) -> None:
        event.setdefault("t", round(time.time(), 3))
        os.write(self._fd, (self._dumps(event) + "\n").encode())
        if durable:
            self._dirty = True

    def commit(self) -> float | None:
        """Sync the terminal events written so far, unless the last sync was under an interval ago.

        Returns None when nothing waits to be synced, else the seconds until commit() should be
        called again to sync it.
        """
        if not self._dirty:
            return None
        now = time.monotonic()
        due = self._last_sync + self._interval
        if now < due:
            return due - now
        self._sync(now)
        return None

    def flush(self) -> None:
        """Sync now whatever terminal events are not on disk yet."""
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
