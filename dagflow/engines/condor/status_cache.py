"""What `dagflow status` of a condor run keeps in condor/ so that reading it again costs little.

Reading a big run's status from DAGMan's files takes seconds (a 100k-node run's job event log is about
150 MB); once its DAG has ended, those files no longer change, and neither does the status. So a status
read from files that did not change since the last one is read from what that one kept:

    condor/dagflow-status.json           the text view's summary (counts, progress, the nodes it lists,
                                         with their records and usage), the run's state and the engine's
                                         notes: small, whatever the run's size
    condor/dagflow-status-records.json   every node's record, as columns: read only when asked for
                                         (`status --all`, a small run's view, the run loop)
    condor/dagflow-status-nodes.json     the text of `status --json`'s nodes (usage included), written by
                                         the ingest that keeps the status, copied by `status --json`

They are written by the engine's ingest (ingest.py), never by a status read. All carry the same key: the
mark (inode, size and modification time) of every file the status is
read from (plan.json, run.json, the node status file, the jobstate and event logs, the DAGMan job's event
log and .dagman.out, usage.jsonl), the run, and the local time zone (event logs write local times). A file
that changed, was replaced, appended to or removed changes its mark, and the status is read from the files
again. Only a status with no DAGMan alive is kept: a live one changes anyway, and asks the schedd why jobs
are idle. The files are replaced whole (a reader sees an old one or a new one), end with a checksum, and
one that is damaged, of another format, run or key, is ignored and written again.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from dagflow.run.journal import NodeRecord
from dagflow.run.status import StatusSummary, write_replacing
from dagflow.run.step_table import StepRow
from dagflow.run.usage import decode_usage, usage_dict

CACHE_FORMAT = 3  # 2: the summary's table per step; 3: file marks without change times
SUMMARY_FILE = "dagflow-status.json"
RECORDS_FILE = "dagflow-status-records.json"
NODES_FILE = "dagflow-status-nodes.json"
KEPT_FILES = (SUMMARY_FILE, RECORDS_FILE, NODES_FILE)  # what a kept status is, in the condor/ directory
_CHUNK = 1 << 22
_TRAILER_MAX = 1 << 16  # a key holds a few dozen numbers and paths


def file_mark(path: Path) -> list[int] | None:
    """What tells a file changed: its inode, size and modification time; None when it is missing. Not its
    change time: a `chmod -R a-w` of the run directory leaves the kept status valid."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def cache_key(run_id: str, dag: str, files: dict[str, Path]) -> dict[str, Any]:
    """The key a cached status is valid for: the run, the local time zone and year (the event log's
    times are local, and an old-style `MM/DD` one has no year), and each file's mark."""
    zone = [time.timezone, time.altzone, time.daylight, *time.tzname, time.localtime().tm_year]
    return {"run": run_id, "dag": dag, "zone": zone, "files": {name: file_mark(path) for name, path in files.items()}}


def _read(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The cache file's data, if it is whole (its checksum), of this format and for this key."""
    try:
        body, _, check = path.read_bytes().rpartition(b"\n")
        if check != b"%08x" % zlib.crc32(body):
            return None
        data = json.loads(body)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT or data.get("key") != key:
        return None
    return data


def _write(path: Path, data: dict[str, Any]) -> bool:
    """Best effort: a run directory this user cannot write keeps no cache. Whether it was written."""
    body = json.dumps({"format": CACHE_FORMAT, **data}, separators=(",", ":")).encode()
    try:
        write_replacing(path, body + b"\n" + b"%08x" % zlib.crc32(body))
    except (OSError, ValueError):
        return False
    return True


def _record(record: NodeRecord) -> list[Any]:
    return [record.state, record.attempts, record.rc, record.why, record.started, record.ended, record.restarts]


def _node_record(raw: list[Any]) -> NodeRecord:
    state, attempts, rc, why, started, ended, restarts = raw
    return NodeRecord(state=state, attempts=attempts, rc=rc, why=why, started=started, ended=ended, restarts=restarts)


def write_status(
    directory: Path,
    key: dict[str, Any],
    facts: dict[str, Any],
    summary: StatusSummary,
    columns: tuple[list[Any], ...],
    position: dict[str, int],
) -> None:
    """Keep a status (see the module docstring). facts: what the status is besides its nodes (the run's
    state, journal times, the engine's extra and notes); columns: RecordColumns' (names, states, attempts,
    rc, why, started, ended); position: each node's position in the plan."""
    names, states, *rest = columns
    state_names = sorted(set(states))
    code = {state: number for number, state in enumerate(state_names)}
    why = {str(position[name]): text for name, text in zip(names, rest[2], strict=True) if text is not None}
    records = {
        "key": key,
        "nodes": [position[name] for name in names],
        "state_names": state_names,
        "states": [code[state] for state in states],
        "attempts": rest[0],
        "rc": rest[1],
        "why": why,
        "started": rest[3],
        "ended": rest[4],
    }
    if not _write(directory / RECORDS_FILE, records):  # first: a summary is never newer than its records
        return
    listed = [[name, state, _record(record)] for name, (state, record) in summary.listed.items()]
    usage = {name: None if used is None else usage_dict(used) for name, used in summary.usage.items()}
    summary_data = {
        "total": summary.total,
        "counts": summary.counts,
        "progress": summary.progress,
        "listed": listed,
        "usage": usage,
        "steps": None if summary.steps is None else [row.to_json() for row in summary.steps],
    }
    _write(directory / SUMMARY_FILE, {"key": key, "facts": facts, "summary": summary_data})


def read_status(directory: Path, key: dict[str, Any]) -> tuple[dict[str, Any], StatusSummary] | None:
    """The facts and summary kept for this key, or None."""
    data = _read(directory / SUMMARY_FILE, key)
    if data is None:
        return None
    try:
        raw = data["summary"]
        listed = {str(name): (str(state), _node_record(record)) for name, state, record in raw["listed"]}
        usage = {str(name): None if used is None else decode_usage(used) for name, used in raw["usage"].items()}
        steps = None if raw.get("steps") is None else [StepRow.from_json(row) for row in raw["steps"]]
        summary = StatusSummary(int(raw["total"]), dict(raw["counts"]), dict(raw["progress"]), listed, usage, steps)
        facts = dict(data["facts"])
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return facts, summary


def read_records(directory: Path, key: dict[str, Any], names: list[str]) -> tuple[list[Any], ...] | None:
    """The records kept for this key, as RecordColumns' columns (names: the plan's, in order), or None."""
    data = _read(directory / RECORDS_FILE, key)
    if data is None:
        return None
    try:
        state_names, positions = data["state_names"], data["nodes"]
        if not _of_types(positions, int) or not _of_types(state_names, str) or not _of_types(data["states"], int):
            return None
        if positions and (min(positions) < 0 or min(data["states"], default=0) < 0):
            return None  # a negative position would count from the end
        states = [state_names[code] for code in data["states"]]
        nodes = [names[position] for position in positions]
        why_at = {int(position): text for position, text in data["why"].items()}
        why = [why_at.get(position) for position in positions]
        columns = (nodes, states, data["attempts"], data["rc"], why, data["started"], data["ended"])
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None
    if len({len(column) for column in columns}) != 1 or not _of_types(data["attempts"], int):
        return None
    if not (_of_types(data["rc"], int, type(None)) and _of_types(why, str, type(None))):
        return None
    if not (_of_types(data["started"], float, int, type(None)) and _of_types(data["ended"], float, int, type(None))):
        return None
    return columns


def _of_types(column: Any, *kinds: type) -> bool:
    return isinstance(column, list) and set(map(type, column)) <= set(kinds)


class NodesText:
    """The text of `status --json`'s nodes for one key, kept in condor/dagflow-status-nodes.json: the text,
    then a line with its key, length and checksum (written after the text, which is written as it is
    made: a big run's is tens of MB)."""

    def __init__(self, directory: Path, key: dict[str, Any], writable: bool = False):
        self.path = directory / NODES_FILE
        self.key = key
        self.writable = writable  # only an ingest keeps the text: a status read writes nothing

    def copy_to(self, write: Callable[[bytes], object]) -> bool:
        """Write the kept text, if it is there whole for this key (checked first: a text found damaged is
        not written at all); whether it was."""
        try:
            with open(self.path, "rb") as handle:
                header = self._header(handle)
                if header is None:
                    return False
                crc, left = 0, header["length"]
                handle.seek(0)
                while left > 0 and (chunk := handle.read(min(left, _CHUNK))):
                    crc, left = zlib.crc32(chunk, crc), left - len(chunk)
                if left or crc != header["crc32"]:
                    return False
                handle.seek(0)  # the same file: one that replaces it since is not read
                left = header["length"]
                while left > 0 and (chunk := handle.read(min(left, _CHUNK))):
                    write(chunk)
                    left -= len(chunk)
        except (OSError, ValueError, RecursionError):
            return False
        return True

    def _header(self, handle: BinaryIO) -> dict[str, Any] | None:
        """The trailer line of the open file, if it is this key's."""
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - _TRAILER_MAX))
        tail = handle.read()
        if b"\n" not in tail:
            return None
        header = json.loads(tail.rpartition(b"\n")[2])
        if not isinstance(header, dict) or header.get("format") != CACHE_FORMAT or header.get("key") != self.key:
            return None
        length = header.get("length")
        trailer = len(tail) - tail.rindex(b"\n")
        if not isinstance(length, int) or length + trailer != size or not isinstance(header.get("crc32"), int):
            return None
        return header

    def keeper(self) -> _NodesTextKeeper | None:
        if not self.writable:
            return None
        try:
            return _NodesTextKeeper(self.path, self.key)
        except OSError:
            return None


class _NodesTextKeeper:
    def __init__(self, path: Path, key: dict[str, Any]):
        self.path, self.key = path, key
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        self.temporary = Path(temporary)
        self.handle: BinaryIO | None = os.fdopen(descriptor, "wb")
        os.fchmod(descriptor, 0o644)
        self.crc, self.length = 0, 0

    def write(self, text: str) -> None:
        if self.handle is None:
            return
        data = text.encode()
        try:
            self.handle.write(data)
        except OSError:  # a full disk: nothing kept
            self.abort()
            return
        self.crc, self.length = zlib.crc32(data, self.crc), self.length + len(data)

    def commit(self) -> None:
        if self.handle is None:
            return
        header = {"format": CACHE_FORMAT, "key": self.key, "length": self.length, "crc32": self.crc}
        try:
            self.handle.write(b"\n" + json.dumps(header, separators=(",", ":")).encode())
            self.handle.close()
            self.handle = None
            os.replace(self.temporary, self.path)
        except OSError:
            self.abort()

    def abort(self) -> None:
        if self.handle is not None:
            with contextlib.suppress(OSError):
                self.handle.close()
            self.handle = None
        self.temporary.unlink(missing_ok=True)
