"""What each node job used on HTCondor, recorded from the nodes' job event log (record_condor_usage), by a
reader of the log's text for usage_events: the events a usage record is made from,
read the way htcondor2.JobEventLog reads them, several times faster (benchmarks/status.py's first status).

JobEventLog parses every event into a ClassAd and formats its text again (tens of µs an event: half a
minute for a 100k-node run's 400k events). Usage needs six kinds of event and a few fields of each, so this
reader matches each event's text with one regular expression over the whole log (in pieces of CHUNK
bytes, never the whole log at once) and parses only what a record needs, when the segment it belongs to
ends. It reads HTCondor's own layout of those events (condor_utils/condor_event.cpp, HTCondor 25):

    000 (1235.000.000) 2026-11-24 01:53:00 Job submitted from host: <127.0.0.1:37147?...>
        [ DAGNodeName = "train.br"; JobBatchName = "region-retrain-20261124-015254-2dac" ]   (or DAG Node: name)
    001 ... Job executing on host: <...>           SlotName: slot@host, then `Name = value` properties
    006 ... Image size of job updated: N          `N  -  MemoryUsage of job (MB)` and the like
    005 ... Job terminated.                        (1) Normal termination (return value N) | (0) Abnormal
                                                   termination (signal N) + core line; four rusage lines;
                                                   the byte counts; the Partitionable Resources table
    004 ... Job was evicted.                       (0) CPU times (HTCondor 25; older: Job was not
                                                   checkpointed.) + two rusage lines; the rest unread
    012 ... Job was held.                          the reason, then `Code N Subcode M`

and computes each field as the bindings do: the resource table by the column edges of its header, as
HTCondor's UsageLineParser does (cells are ClassAd literals: an integer, a real, or empty, which sets
nothing), case-insensitive attribute names, the run's CPU time from the first rusage line, the event's
time through mktime and back as JobEvent.timestamp has it. A record is then made by usage_events' own
_record from these values, so the text reader and the bindings share every rule past the parsing.

Where an event of a job differs from that layout in any way this reader does not know to be the bindings'
reading (an unknown line, a value that is not a number literal, a date that is not ISO 8601, an old
`MM/DD` header), it reads none of that job: the job's events are copied and parsed by JobEventLog, and
its records are put back in log order. So the records are the bindings' whatever the log holds; only the
time differs. tests/test_usage_log.py checks it against JobEventLog on the pool's logs (one with an
eviction and a hold, written by the real pool), and on logs with every variant this reader reads or declines.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

from dagflow.engines.condor.usage_events import (
    _alias,
    _execute_allocation,
    _Job,
    _parsed_events,
    _record,
    _segment_key,
    _step_of,
    iter_usage_records,
    segment_keys,
)
from dagflow.gc_pause import gc_paused
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.run.usage import (
    NodeUsage,
    encode_usage,
    read_usage,
    record_lines_once,
    renumber_line,
    usage_path,
)


def renumbered(line: Line, attempt: int) -> Line:
    """The line of the same record numbered `attempt`."""
    return Line(line.node, line.key, attempt, renumber_line(line.text, attempt))


CHUNK = 8 << 20  # bytes of the log read at a time
_SYNC_LINE = re.compile(rb"(\n\.\.\.\r?\n)")  # an event's end
SUBMIT, EXECUTE, EVICTED, TERMINATED, IMAGE_SIZE, HELD = b"000", b"001", b"004", b"005", b"006", b"012"
_END_CODES = {EVICTED: 4, TERMINATED: 5, HELD: 12}

# An event of a kind usage reads, after the `...` line that ends the one before it: its code, cluster, ISO
# date and time (empty when the header has another form: that job is declined), the rest of its header
# line, and its body (the lines before its own `...`).
_EVENT = re.compile(
    rb"\.\.\.\n(0(?:00|01|04|05|06|12)) \((\d{1,9})\.\d+\.\d+\) "
    rb"(?:(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d{1,6})? )?"
    rb"([^\n]*)\n((?:(?!\.\.\.\n)[^\n]*\n)*)(?=\.\.\.\n)"
)
_SUBMITTED = b"Job submitted from host: "
_EXECUTING = b"Job executing on host: "
_IMAGE = re.compile(rb"Image size of job updated: \d{1,18}")
# The submit event's DAG node note: HTCondor 25's ClassAd (DAGNodeName first, as DAGMan writes it), or the
# older line. Node names are printable ASCII, no quote or backslash (a ClassAd string needs no escape).
_NAME = rb"[\x21\x23-\x5b\x5d-\x7e]+"
_NOTE_AD = re.compile(
    rb'[ \t]*\[ DAGNodeName = "(' + _NAME + rb')"(?:; [A-Za-z_]\w* = (?:"[^"\\\n]*"|-?\d{1,18}))* \][ \t]*\n'
)
_NOTE_LINE = re.compile(rb"[ \t]*DAG Node: (" + _NAME + rb")[ \t]*\n")
# An execute event's body: SlotName, then ExecuteProps' `Name = value` lines; the four a record reads
_EXECUTE_BODY = re.compile(rb"(?:\tSlotName:([^\n]*)\n)?(?:\t[A-Za-z_][A-Za-z0-9_]* = [^\n]*\n)*")
_ALLOCATION = re.compile(rb"^\t(cpus|memory|disk|gpus) = ([^\n]*)$", re.IGNORECASE | re.MULTILINE)
_IMAGE_LINE = re.compile(rb"\t(\d{1,18})  -  (MemoryUsage|ResidentSetSize|ProportionalSetSize) of job \((?:MB|KB)\)")
# A rusage line (user and system CPU time: days hours:minutes:seconds; HTCondor sums them in a C int)
_RUSAGE = rb"\t\tUsr (\d{1,4}) (\d\d?):(\d\d?):(\d\d?), Sys (\d{1,4}) (\d\d?):(\d\d?):(\d\d?)  -  "
_OTHER_RUSAGE = rb"\t\tUsr \d{1,4} \d\d?:\d\d?:\d\d?, Sys \d{1,4} \d\d?:\d\d?:\d\d?  -  "
# A terminated event's body: how it ended (return value | signal and core line), its four rusage lines (the
# bindings take the first as the run's), its byte counts, and its usage table's header and rows, if any.
_TERMINATED = re.compile(
    rb"\t\((?:1\) Normal termination \(return value (\d{1,9})\)"
    rb"|0\) Abnormal termination \(signal (\d{1,9})\)\n\t(?:\(0\) No core file|\(1\) Corefile in: [^\n]*))\n"
    + _RUSAGE
    + rb"Run Remote Usage\n(?:"
    + _OTHER_RUSAGE
    + rb"(?:Run Local|Total Remote|Total Local) Usage\n){3}"
    rb"(?:\t\d{1,18}  -  (?:Run|Total) Bytes (?:Sent|Received) By Job\n)*"
    rb"(?:(\tPartitionable Resources :[^\n]*)\n((?:[^\n]*:[^\n]*\n)*))?"
)
_EVICTED = re.compile(
    # `(0) CPU times` (HTCondor 25), `(0) Job was not checkpointed.`; one that was requeued has more lines
    rb"\t\(\d{1,9}\) (?!Job terminated and was requeued)[A-Za-z][^\n]*\n"
    + _RUSAGE + rb"Run Remote Usage\n" + _OTHER_RUSAGE + rb"Run Local Usage\n(?:[^\n]*\n)*"
)  # fmt: skip
_HOLD_CODES = re.compile(rb"\tCode (-?\d{1,9}) Subcode (-?\d{1,9})")
_ROW = re.compile(rb"[\t ]*([A-Za-z_][A-Za-z0-9_]*)[ :]")  # a usage table row's resource tag
_INTEGER = re.compile(rb"0|[1-9]\d{0,17}")
_REAL = re.compile(rb"(?:0|[1-9]\d{0,17})\.\d{1,17}")
_WHITESPACE = b" \t\n\r\x0b\x0c"  # C isspace, as HTCondor's trim

# The usage table's attributes a record reads, by their lower-case name (ClassAd names are case-insensitive)
_TABLE_NAMES = {
    name.lower(): name
    for resource in ("Cpus", "Memory", "Disk", "GPUs")
    for name in (f"{resource}Usage", f"Request{resource}", resource)
} | {"timeexecuteusage": "TimeExecuteUsage", "gpusmemoryusage": "GPUsMemoryUsage"}
_ALLOCATION_NAMES = {"cpus": "Cpus", "memory": "Memory", "disk": "Disk", "gpus": "GPUs"}


class _Declined(Exception):
    """An event this reader does not read as the bindings would: its job is left to them."""


class _DeclinedAll(Exception):
    """A log this reader does not read at all (carriage returns): the bindings read it."""


class _Event(dict[str, Any]):
    """What _record reads of an event: its attributes by the bindings' names, and its time."""

    __slots__ = ("timestamp",)

    def __init__(self, timestamp: float, values: dict[str, Any]):
        super().__init__(values)
        self.timestamp = timestamp


def log_pieces(path: Path, size: int | None = None) -> Iterator[bytes]:
    """The log's text in pieces of about `size` bytes (CHUNK), each ending with an event's `...` line; a last
    event not ended yet (being written) is left out, as JobEventLog leaves it. FileNotFoundError if no log."""
    size = size or CHUNK
    with open(path, "rb") as log:
        rest = b""
        while block := log.read(size):
            data = rest + block if rest else block
            end = _end_of_last_event(data)
            if end < 0:
                rest = data
                continue
            yield data[:end]
            rest = data[end:]


def _end_of_last_event(data: bytes) -> int:
    """Where the last `...` line in data ends (its newline, or carriage return and newline, included); -1."""
    at = len(data)
    while (at := data.rfind(b"\n...", 0, at)) >= 0:
        after = data[at + 4 : at + 6]
        if after[:1] == b"\n":
            return at + 5
        if after == b"\r\n":
            return at + 6
    return -1


class Line(NamedTuple):
    """A record as usage.jsonl holds it (encode_usage's line), with what deduplicating and numbering it reads."""

    node: str
    key: str
    attempt: int
    text: bytes


def read_records(path: Path, plan: Plan | PlanIndex, clusters: set[int] | None = None) -> list[Line]:
    """One record per segment of these jobs (every job's when None), in log order, as its line: the records
    of iter_usage_records over JobEventLog's events of the same log, read from the text (see the module
    docstring). Kept as lines, not NodeUsage objects: a 100k-node run's are 50 MB, not 150."""
    try:
        with gc_paused():
            return _Reader(plan, clusters).read(path)
    except _DeclinedAll:
        return [_line(record) for record in _bindings_records(path, plan, clusters)]


def _line(record: NodeUsage) -> Line:
    return Line(record.node, record.key or "", record.attempt, encode_usage(record))


class _Reader:
    def __init__(self, plan: Plan | PlanIndex, clusters: set[int] | None):
        self.plan = plan
        self.clusters = clusters
        self.jobs: dict[int, _Job] = {}
        self.executes: dict[int, tuple[bytes, bytes]] = {}  # the latest execute event's header rest and body
        self.images: dict[int, bytes] = {}  # the body of the latest image size event of the job's run
        self.records: list[tuple[int, int, Line]] = []  # (position in the log, cluster, record)
        self.declined: dict[int, list[int]] = {}  # cluster -> its [evictions, holds] so far
        self.ends: dict[str, int] = {}  # a declined job's segment key -> position of its ending event
        self.stamps: dict[bytes, float] = {}
        self.attempts: dict[str, int] = {}  # records made per node
        self.requests: dict[str, dict[str, float]] = {}  # _record's cache of each step's request
        self.allocations: dict[tuple[tuple[bytes, bytes], ...], dict[str, float]] = {}
        self.tables: dict[bytes, dict[bytes, Any]] = {}  # usage table header -> row -> its attributes

    def read(self, path: Path) -> list[Line]:
        position = 0
        wanted = self.clusters
        jobs = self.jobs
        declined = self.declined
        for piece in log_pieces(path):
            if b"\r" in piece:
                raise _DeclinedAll
            for code, number, when, head, body in _EVENT.findall(b"...\n" + piece):
                position += 1
                cluster = int(number)
                if wanted is not None and cluster not in wanted:
                    continue
                if cluster in declined:
                    self._declined_event(code, cluster, position)
                    continue
                if code != SUBMIT and cluster not in jobs:
                    continue  # not a job of a node in the plan, or no submit event seen: as iter_usage_records
                try:
                    self._event(code, cluster, when, head, body, position)
                except _Declined:
                    job = jobs.pop(cluster, None)
                    declined[cluster] = [job.evictions, job.holds] if job is not None else [0, 0]
                    self.executes.pop(cluster, None)
                    self.images.pop(cluster, None)
                    if code != SUBMIT:
                        self._declined_event(code, cluster, position)
        if not declined:
            return [line for _, _, line in self.records]
        ends = self.ends  # and where the segments read before a job was declined end:
        ends.update((line.key, at) for at, cluster, line in self.records if cluster in declined)
        records = [(at, line) for at, cluster, line in self.records if cluster not in declined]
        self.records = []
        records += [
            (ends.get(record.key or "", position + 1), _line(record))
            for record in _bindings_records(path, self.plan, set(declined))
        ]
        records.sort(key=lambda item: item[0])
        attempts: dict[str, int] = {}  # numbered in log order again, as iter_usage_records numbers them
        numbered = []
        for _, line in records:
            attempt = attempts[line.node] = attempts.get(line.node, 0) + 1
            numbered.append(line if line.attempt == attempt else renumbered(line, attempt))
        return numbered

    def _declined_event(self, code: bytes, cluster: int, position: int) -> None:
        """Note where a declined job's segment-ending event is, by the key the bindings' record will have."""
        counts = self.declined[cluster]
        if code == TERMINATED:
            self.ends[str(cluster)] = position
        elif code == EVICTED:
            counts[0] += 1
            self.ends[_segment_key(cluster, "evicted", counts[0])] = position
        elif code == HELD:
            counts[1] += 1
            self.ends[_segment_key(cluster, "held", counts[1])] = position

    def _event(self, code: bytes, cluster: int, when: bytes, head: bytes, body: bytes, position: int) -> None:
        if not when:
            raise _Declined  # an old `MM/DD` date, a time zone: read by the bindings
        if code == SUBMIT:
            if not head.startswith(_SUBMITTED):
                raise _Declined
            name = _node_name(body)
            step = None if name is None else _step_of(self.plan, name)
            if step is not None:
                self.jobs[cluster] = _Job(name, step)  # type: ignore[arg-type]
            else:
                self.jobs.pop(cluster, None)
            return
        job = self.jobs[cluster]
        if code == EXECUTE:
            if not head.startswith(_EXECUTING):
                raise _Declined
            job.started = self._stamp(when)
            self.executes[cluster] = (head, body)
            self.images.pop(cluster, None)
            return
        if code == IMAGE_SIZE:
            if _IMAGE.fullmatch(head) is None:
                raise _Declined
            if job.started is not None:
                self.images[cluster] = body
            return
        if code == TERMINATED:
            if head != b"Job terminated.":
                raise _Declined
            values = self._terminated(body)
        elif code == EVICTED:
            if not head.startswith(b"Job was evicted."):
                raise _Declined
            values = _evicted(body)
        else:
            if not head.startswith(b"Job was held."):
                raise _Declined
            values = _held(body)
        if job.started is not None:
            # before the counts change (a job declined here is counted from scratch); the image size event's
            # memory only where the record reads it (a terminated event's own MemoryUsage comes first)
            self._run_of(cluster, job, code != TERMINATED or "MemoryUsage" not in values)
        if code == EVICTED:
            job.evictions += 1
        elif code == HELD:
            job.holds += 1
        if job.started is None:  # held while idle: nothing ran
            return
        event = _Event(self._stamp(when), values)
        attempt = self.attempts[job.node] = self.attempts.get(job.node, 0) + 1
        cpu = values.pop("cpu")
        record = _record(event, _END_CODES[code], cluster, job, attempt, self.plan, cpu, self.requests)
        self.records.append((position, cluster, Line(job.node, record.key or "", attempt, encode_usage(record))))
        job.started = None
        del self.executes[cluster]  # read again only after the job's next execute event
        self.images.pop(cluster, None)

    def _run_of(self, cluster: int, job: _Job, memory: bool) -> None:
        """Fill in the job's run from its latest execute and (if `memory`) image size events, parsed only now."""
        head, body = self.executes[cluster]
        job.slot, job.allocated = self._execute(body)
        job.host = job.slot.split("@", 1)[1] if job.slot and "@" in job.slot else _alias(_text(head[len(_EXECUTING) :]))
        image = self.images.get(cluster) if memory else None
        job.memory_mb = None if image is None else _image_memory(image)

    def _execute(self, body: bytes) -> tuple[str | None, dict[str, float]]:
        """(SlotName, what ExecuteProps says the slot gave: Cpus, Memory, Disk in MB, GPUs) of an execute event
        (the allocation is shared by the jobs given the same: _record copies it)."""
        found = _EXECUTE_BODY.fullmatch(body)
        if found is None:
            raise _Declined
        slot: str | None = None
        if (name := found.group(1)) is not None:
            name = name.strip(_WHITESPACE)
            if b'"' in name:
                raise _Declined
            slot = _text(name) or None
        given = tuple(_ALLOCATION.findall(body))
        allocated = self.allocations.get(given)
        if allocated is None:
            allocated = self.allocations[given] = _allocation(given)
        return slot, allocated

    def _stamp(self, when: bytes) -> float:
        stamp = self.stamps.get(when)
        if stamp is None:
            stamp = self.stamps[when] = _timestamp(when)
        return stamp

    def _terminated(self, body: bytes) -> dict[str, Any]:
        found = _TERMINATED.fullmatch(body)
        if found is None:
            raise _Declined
        returned, signal, *times, header, rows = found.groups()
        values: dict[str, Any] = {"cpu": _cpu(times)}
        if returned is not None:
            values["TerminatedNormally"] = True
            values["ReturnValue"] = int(returned)
        else:
            values["TerminatedNormally"] = False
            values["TerminatedBySignal"] = int(signal)
        if header is None:
            return values
        parsed = self.tables.get(header)
        if parsed is None:
            parsed = self.tables[header] = {}
        edges = None
        for row in rows.split(b"\n")[:-1]:
            found_row = parsed.get(row)
            if found_row is None:
                if edges is None:
                    edges = _column_edges(header)
                found_row = parsed[row] = _table_row(row, edges)
            values.update(found_row)
        return values


def _node_name(body: bytes) -> str | None:
    """The DAG node a submit event names; None for a job that is not a node (no note at all)."""
    if not body:
        return None
    note = _NOTE_AD.fullmatch(body) or _NOTE_LINE.fullmatch(body)
    if note is None:
        raise _Declined
    return note.group(1).decode("ascii")


def _allocation(given: tuple[tuple[bytes, bytes], ...]) -> dict[str, float]:
    """What the execute event's ExecuteProps lines (name, value) of Cpus, Memory, Disk and GPUs say the slot
    gave, as _execute_allocation reads the bindings' ExecuteProps (the last line of a name counts)."""
    props: dict[str, Any] = {}
    for prop, raw in given:
        value = _literal(raw)
        if value is None:
            raise _Declined
        props[_ALLOCATION_NAMES[prop.decode().lower()]] = value
    return _execute_allocation(props) if props else {}


def _image_memory(body: bytes) -> int | None:
    """The MemoryUsage of an image size event (its last, as the bindings read them), None if it has none."""
    memory = None
    for line in body.split(b"\n")[:-1]:
        found = _IMAGE_LINE.fullmatch(line)
        if found is None:
            raise _Declined
        if found.group(2) == b"MemoryUsage":
            memory = int(found.group(1))
    return memory


def _evicted(body: bytes) -> dict[str, Any]:
    found = _EVICTED.fullmatch(body)
    if found is None:
        raise _Declined  # e.g. a `terminated and was requeued` eviction, which has more lines the bindings read
    return {"cpu": _cpu(found.groups())}


def _held(body: bytes) -> dict[str, Any]:
    lines = body.split(b"\n")
    values: dict[str, Any] = {"cpu": None, "HoldReasonCode": 0, "HoldReasonSubCode": 0}
    if len(lines) < 2:
        return values
    reason = _text(lines[0].strip(_WHITESPACE))
    if reason and reason != "Reason unspecified":
        values["HoldReason"] = reason
    if len(lines) > 2:
        codes = _HOLD_CODES.fullmatch(lines[1])
        if codes is None:
            raise _Declined
        values["HoldReasonCode"], values["HoldReasonSubCode"] = int(codes.group(1)), int(codes.group(2))
    return values


def _column_edges(header: bytes) -> tuple[int, int, int]:
    """The right edges of the Usage, Request and Allocated columns (0: none) after the header's colon, as
    HTCondor's UsageLineParser.init finds them."""
    table = header[header.index(b":") + 1 :]
    size = len(table)
    at = 0
    edges = []
    for _ in ("Usage", "Request"):
        while at < size and table[at] == 0x20:
            at += 1
        while at < size and table[at] != 0x20:
            at += 1
        edges.append(at + 1)
    while at < size and table[at] == 0x20:
        at += 1
    allocated = table.find(b"Allocated", at) if at < size else -1
    return edges[0], edges[1], allocated + 9 if allocated >= 0 else 0


def _table_row(row: bytes, edges: tuple[int, int, int]) -> dict[str, Any]:
    """The attributes a usage table row sets that a record reads (a row without a colon ends the table: the
    bindings read nothing after it, so it is declined here)."""
    found = _ROW.match(row)
    colon = row.find(b":", found.end(1)) if found is not None else -1
    if found is None or colon < 0:
        raise _Declined
    tag = found.group(1).decode("ascii").lower()
    names = [f"{tag}usage", f"request{tag}", tag]
    if not any(name in _TABLE_NAMES for name in names):
        return {}
    use, request, allocated = edges
    table = row[colon + 1 :]
    if len(table) < (allocated or request):
        raise _Declined  # HTCondor reads the cells past the line's end
    cells = [table[:use], table[use:request]]
    if allocated:
        cells.append(table[request:allocated])
    parsed: dict[str, Any] = {}
    for name, cell in zip(names, cells, strict=False):
        value = _literal(cell)
        if value is None:
            continue
        if name in _TABLE_NAMES:
            parsed[_TABLE_NAMES[name]] = value
    return parsed


def _literal(cell: bytes) -> Any:
    """A cell's ClassAd literal: an int or a float; None for an empty cell (AssignExpr sets nothing)."""
    text = cell.strip(_WHITESPACE)
    if not text:
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    if _REAL.fullmatch(text):
        return float(text)
    raise _Declined


def _cpu(parts: list[bytes] | tuple[bytes, ...]) -> float:
    """The run's CPU seconds from its rusage line, as _cpu_seconds reads the bindings' RunRemoteUsage (the
    same seconds, written again as `Usr D HH:MM:SS, Sys D HH:MM:SS`)."""
    usr_d, usr_h, usr_m, usr_s, sys_d, sys_h, sys_m, sys_s = map(int, parts)
    return float((usr_d + sys_d) * 86400 + (usr_h + sys_h) * 3600 + (usr_m + sys_m) * 60 + usr_s + sys_s)


def _timestamp(when: bytes) -> float:
    """The event's time as JobEvent.timestamp has it: the header's local time through mktime (HTCondor's
    readHeader), back to local time (toClassAd's EventTime) and to an epoch by datetime (the bindings)."""
    month, day, hour, minute, second = (
        int(when[5:7]),
        int(when[8:10]),
        int(when[11:13]),
        int(when[14:16]),
        int(when[17:19]),
    )
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        raise _Declined  # HTCondor refuses some of these, and mktime would move others
    try:
        clock = time.mktime((int(when[:4]), month, day, hour, minute, second, 0, 0, -1))
        local = time.localtime(clock)
        return float(int(datetime(*local[:6]).timestamp()))
    except (ValueError, OverflowError, OSError):
        raise _Declined from None


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Declined from None


def _bindings_records(path: Path, plan: Plan | PlanIndex, clusters: set[int] | None) -> list[NodeUsage]:
    """The records JobEventLog reads from the events of these jobs (every job's when None)."""
    with tempfile.TemporaryDirectory(prefix="dagflow-usage-") as directory:
        copy = Path(directory) / "events.log"
        with open(copy, "wb") as out:
            for piece in log_pieces(path):
                out.write(_events_of(piece, clusters))
        return list(iter_usage_records(_parsed_events(copy, path), plan))


def _events_of(piece: bytes, clusters: set[int] | None) -> bytes:
    """The complete events of a piece of the log that belong to these jobs (all when None)."""
    if clusters is None:
        return piece
    kept = []
    parts = _SYNC_LINE.split(piece)  # event, its `...` line, the next event, ...
    for event, sync in zip(parts[::2], parts[1::2], strict=False):
        event = event.lstrip(b"\r\n")
        number = event[5 : event.find(b".", 5)]
        if event and number.isdigit() and int(number) in clusters:
            kept += (event, sync)
    return b"".join(kept)


# The key of a complete condor record line as encode_usage writes it (`key` is its last field).
_RECORDED_KEY = re.compile(rb'"engine":"condor",[^\n]*,"key":"([^"\\\n]*)"\}$', re.MULTILINE)


def log_segment_keys(event_log: Path) -> set[str]:
    """segment_keys of the log's complete events, read a piece at a time; FileNotFoundError if no log."""
    keys: set[str] = set()
    counts: dict[tuple[bytes, int], int] = {}
    for piece in log_pieces(event_log):
        keys |= segment_keys(piece, counts)
    return keys


def record_condor_usage(run_dir: Path, plan: Plan | PlanIndex, event_log: Path) -> int:
    """Append the records of segments the log ends and usage.jsonl lacks; how many were appended.

    Only the events of the jobs with a new segment are parsed (a big run's log holds hundreds of
    thousands), and only the recorded lines of their nodes decoded; a node's new records are numbered on
    from its recorded ones.
    """
    try:
        ending = log_segment_keys(event_log)
    except FileNotFoundError:
        return 0
    new = ending - _recorded_keys(run_dir)  # a line's key, whether or not it reads as a sane record
    if not new:  # the usual case once recorded: no record parsed at all
        return 0
    lines = read_records(event_log, plan, {int(key.split(".", 1)[0]) for key in new})
    nodes = {line.node for line in lines}
    recorded = [record for record in read_usage(run_dir, nodes) if record.engine == "condor"]
    done = {record.key for record in recorded}
    attempts = Counter(record.node for record in recorded)
    numbered = []
    for line in lines:
        if line.key not in done:
            attempt = attempts[line.node] = attempts[line.node] + 1
            numbered.append(line if line.attempt == attempt else renumbered(line, attempt))
    del lines
    return record_lines_once(run_dir, ((line.node, line.key, line.text) for line in numbered))


def _recorded_keys(run_dir: Path) -> set[str]:
    """The keys of the condor record lines in usage.jsonl, found without parsing them: a cheap superset of
    read_usage's (it also holds those of well-formed lines that read_usage skips as insane)."""
    try:
        data = usage_path(run_dir).read_bytes()
    except FileNotFoundError:
        return set()
    return {key.decode("utf-8", "replace") for key in _RECORDED_KEY.findall(data)}
