"""The one reader of an HTCondor job event log (the nodes' `dagflow.jobs.log`, the DAGMan job's own log):
typed events, in log order, read a piece of CHUNK bytes at a time (a 100k-node run's log is 150 MB: its
text is never all held).

Each event is the one htcondor2.JobEventLog reads from the same text, several times faster: JobEventLog
parses every event into a ClassAd and formats its text again (tens of µs an event). This reader matches
each event with one regular expression and parses the few fields dagflow reads, in HTCondor's own layout
of them (condor_utils/condor_event.cpp, HTCondor 25):

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
    009 ... Job was aborted.                       the reason
    013 ... Job was released.                      (nothing read)

Each field is computed as the bindings compute it: the resource table by the column edges of its header,
as HTCondor's UsageLineParser does (cells are ClassAd literals: an integer, a real, or empty, which sets
nothing), case-insensitive attribute names, the run's CPU time from the first rusage line, the event's time
through mktime and back as JobEvent.timestamp has it.

An event whose text differs from that layout in any way this reader does not know to be the bindings'
reading (an unknown line, a value that is not a number literal, an old `MM/DD` date, a time zone) is read
by JobEventLog from a copy of that event's text (each event's reading depends on its own text alone), and
a piece of the log with carriage returns all of it: so the events are the bindings' whatever the log
holds; only the time differs. A last event not ended by its `...` line yet (being written) is left out, as
JobEventLog leaves it. tests/test_event_log.py checks all of it against JobEventLog.
"""

from __future__ import annotations

import functools
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dagflow.gc_pause import gc_paused

SUBMIT, EXECUTE, EVICTED, TERMINATED, IMAGE_SIZE, ABORTED, HELD, RELEASED = 0, 1, 4, 5, 6, 9, 12, 13
CHUNK = 8 << 20  # bytes of the log read at a time
_BODIES_KEPT = 4096  # events' texts whose reading is kept (a big DAG's jobs often log the same text)


@dataclass(frozen=True, slots=True)
class Event:
    cluster: int
    time: float  # JobEvent.timestamp: epoch seconds, whole


@dataclass(frozen=True, slots=True)
class Submitted(Event):
    node: str | None  # the DAG node the job is of (DAGMan's note); None for a job of no node


@dataclass(frozen=True, slots=True)
class Executed(Event):
    slot: str | None  # SlotName: slot1_2@host
    host: str | None  # the slot's host, else the sinful string's alias or address
    props: Mapping[str, int | float] = field(hash=False)  # ExecuteProps' Cpus, Memory, Disk (KB), GPUs


@dataclass(frozen=True, slots=True)
class ImageSize(Event):
    memory_mb: int | None  # MemoryUsage: the job's peak resident set so far


@dataclass(frozen=True, slots=True)
class Terminated(Event):
    return_value: int | None  # None: killed by a signal
    signal: int | None
    cpu_s: float | None  # RunRemoteUsage: the run's user plus system CPU seconds
    usage: Mapping[str, int | float] = field(hash=False)  # the resource table's attributes in _TABLE_NAMES


@dataclass(frozen=True, slots=True)
class Evicted(Event):
    cpu_s: float | None


@dataclass(frozen=True, slots=True)
class Held(Event):
    reason: str | None
    code: int | None
    subcode: int | None


@dataclass(frozen=True, slots=True)
class Aborted(Event):
    reason: str | None


@dataclass(frozen=True, slots=True)
class Released(Event):
    pass


_SYNC_LINE = re.compile(rb"(\n\.\.\.\r?\n)")  # an event's end
# An event of a kind read here, after the `...` line that ends the one before it: its whole header line, and
# in it the code, cluster, date and time, and the rest; then its body (the lines before its own `...`).
_EVENT = (
    rb"\.\.\.\n((0(?:%s)) \((\d{1,9})\.\d+\.\d+\) (\S+ \S+) ?([^\n]*))\n"
    rb"((?:(?!\.\.\.\n)[^\n]*\n)*)(?=\.\.\.\n)"
)
_KINDS = {Submitted: b"00", Executed: b"01", Evicted: b"04", Terminated: b"05", ImageSize: b"06", Aborted: b"09",
          Held: b"12", Released: b"13"}  # fmt: skip
ALL_KINDS = tuple(_KINDS)


@functools.cache
def _event_pattern(kinds: tuple[type[Event], ...]) -> re.Pattern[bytes]:
    return re.compile(_EVENT % b"|".join(_KINDS[kind] for kind in kinds))


_ISO = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{1,6})?")
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
# An execute event's body: SlotName, then ExecuteProps' `Name = value` lines; the four read
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
_USAGE_TEXT = re.compile(r"Usr (\d+) (\d+):(\d+):(\d+), Sys (\d+) (\d+):(\d+):(\d+)")

# The usage table's attributes read, by their lower-case name (ClassAd names are case-insensitive)
_TABLE_NAMES = {
    name.lower(): name
    for resource in ("Cpus", "Memory", "Disk", "GPUs")
    for name in (f"{resource}Usage", f"Request{resource}", resource)
} | {"timeexecuteusage": "TimeExecuteUsage", "gpusmemoryusage": "GPUsMemoryUsage"}
_PROPS = {"cpus": "Cpus", "memory": "Memory", "disk": "Disk", "gpus": "GPUs"}


class _Declined(Exception):
    """An event this reader does not read as the bindings would: JobEventLog reads it."""


def log_pieces(path: Path, size: int | None = None) -> Iterator[bytes]:
    """The log's text in pieces of about `size` bytes (CHUNK), each ending with an event's `...` line; a last
    event not ended yet is left out. FileNotFoundError if no log."""
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


def read_events(
    path: Path, clusters: set[int] | None = None, strict: bool = True, kinds: tuple[type[Event], ...] = ALL_KINDS
) -> Iterator[Event]:
    """The events of these kinds in the log (of these jobs only, unless None), in log order; none if there is
    no log yet. ValueError, naming the log, for an event JobEventLog cannot read either (skipped unless strict)."""
    reader = _Reader(path, strict)
    pattern = _event_pattern(kinds)
    try:
        pieces = log_pieces(path)
        with gc_paused():
            for piece in pieces:
                if b"\r" in piece:
                    yield from reader.bindings(piece, clusters, kinds)
                    continue
                for header, code, number, when, head, body in pattern.findall(b"...\n" + piece):
                    cluster = int(number)
                    if clusters is not None and cluster not in clusters:
                        continue
                    try:
                        yield reader.parse(code, cluster, when, head, body)
                    except _Declined:
                        yield from reader.bindings(header + b"\n" + body + b"...\n", clusters, kinds)
    except FileNotFoundError:
        return


class _Reader:
    """The parsing of one log's events, with what is shared between them (times, execute properties and
    usage table rows are often the same text)."""

    def __init__(self, path: Path, strict: bool):
        self.path = path
        self.strict = strict
        self.stamps: dict[bytes, float] = {}
        self.allocations: dict[tuple[tuple[bytes, bytes], ...], dict[str, int | float]] = {}
        self.tables: dict[bytes, dict[bytes, dict[str, int | float]]] = {}  # table header -> row -> values
        self.bodies: dict[tuple[bytes, bytes, bytes], tuple[Any, ...]] = {}  # (code, head, body) -> _fields

    def parse(self, code: bytes, cluster: int, when: bytes, head: bytes, body: bytes) -> Event:
        at = self.stamps.get(when)
        if at is None:
            at = self.stamps[when] = _timestamp(when)
        key = (code, head, body)
        known = self.bodies.get(key)
        if known is None:
            if len(self.bodies) >= _BODIES_KEPT:
                self.bodies.clear()
            known = self.bodies[key] = self._fields(code, head, body)
        return known[0](cluster, at, *known[1:])

    def _fields(self, code: bytes, head: bytes, body: bytes) -> tuple[Any, ...]:
        """The event's class and its fields after cluster and time."""
        if code == b"000":
            if not head.startswith(_SUBMITTED):
                raise _Declined
            return Submitted, _node_name(body)
        if code == b"001":
            if not head.startswith(_EXECUTING):
                raise _Declined
            slot, props = self._execute(body)
            host = slot.split("@", 1)[1] if slot and "@" in slot else _alias(_text(head[len(_EXECUTING) :]))
            return Executed, slot, host, props
        if code == b"006":
            if _IMAGE.fullmatch(head) is None:
                raise _Declined
            return ImageSize, _image_memory(body)
        if code == b"005":
            if head != b"Job terminated.":
                raise _Declined
            return self._terminated(body)
        if code == b"004":
            if not head.startswith(b"Job was evicted."):
                raise _Declined
            found = _EVICTED.fullmatch(body)
            if found is None:
                raise _Declined  # e.g. a `terminated and was requeued` eviction, which has more lines
            return Evicted, _cpu(found.groups())
        if code == b"012":
            if not head.startswith(b"Job was held."):
                raise _Declined
            return _held(body)
        if code == b"009":
            lines = body.split(b"\n")
            if not head.startswith(b"Job was aborted") or len(lines) > 2:
                raise _Declined
            return Aborted, _text(lines[0].strip(_WHITESPACE)) or None
        if not head.startswith(b"Job was released"):
            raise _Declined
        return (Released,)

    def _execute(self, body: bytes) -> tuple[str | None, dict[str, int | float]]:
        """(SlotName, ExecuteProps' Cpus, Memory, Disk and GPUs: the last line of a name counts) of an execute
        event (the props are shared by the events that give the same)."""
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
        props = self.allocations.get(given)
        if props is None:
            props = {}
            for prop, raw in given:
                value = _literal(raw)
                if value is None:
                    raise _Declined
                props[_PROPS[prop.decode().lower()]] = value
            self.allocations[given] = props
        return slot, props

    def _terminated(self, body: bytes) -> tuple[Any, ...]:
        found = _TERMINATED.fullmatch(body)
        if found is None:
            raise _Declined
        returned, signal, *times, header, rows = found.groups()
        usage: dict[str, int | float] = {}
        if header is not None:
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
                usage.update(found_row)
        return (
            Terminated,
            None if returned is None else int(returned),
            None if signal is None else int(signal),
            _cpu(times),
            usage,
        )

    def bindings(self, text: bytes, clusters: set[int] | None, kinds: tuple[type[Event], ...]) -> list[Event]:
        """The events of these jobs and kinds JobEventLog reads from this text (a copy, in a file of its own)."""
        import htcondor2

        with tempfile.TemporaryDirectory(prefix="dagflow-events-") as directory:
            copy = Path(directory) / "events.log"
            copy.write_bytes(text)
            try:
                read = [from_bindings(event) for event in htcondor2.JobEventLog(str(copy)).events(0)]
            except htcondor2.HTCondorException as error:
                if self.strict:
                    raise ValueError(f"{self.path}: {error}") from None
                return []
        wanted = [event for event in read if type(event) in kinds]
        return wanted if clusters is None else [event for event in wanted if event.cluster in clusters]


def bindings_events(path: Path) -> Iterator[Event]:
    """The same events from htcondor2.JobEventLog's reading of the whole log: the reference read_events is
    checked against."""
    import htcondor2

    for event in htcondor2.JobEventLog(str(path)).events(0):
        if (typed := from_bindings(event)) is not None:
            yield typed


def from_bindings(event: Any) -> Event | None:
    """The typed event of a JobEventLog event; None for a kind not read here."""
    code = int(event.type)
    cluster, at = event.cluster, float(event.timestamp)
    if code == SUBMIT:
        structured = event.get("StructuredNotes")  # HTCondor 25: [ DAGNodeName = "..."; ... ]
        notes = event.get("LogNotes") or ""
        node = None
        if structured is not None and "DAGNodeName" in structured:
            node = str(structured["DAGNodeName"])
        elif notes.startswith("DAG Node: "):
            node = notes[len("DAG Node: ") :].strip()
        return Submitted(cluster, at, node)
    if code == EXECUTE:
        slot = _str(event.get("SlotName"))
        host = slot.split("@", 1)[1] if slot and "@" in slot else _alias(event.get("ExecuteHost"))
        return Executed(cluster, at, slot, host, _execute_props(event.get("ExecuteProps")))
    if code == IMAGE_SIZE:
        return ImageSize(cluster, at, _number(event.get("MemoryUsage")))  # type: ignore[arg-type]
    if code == TERMINATED:
        normal = bool(event.get("TerminatedNormally"))
        usage = {name: value for name in _TABLE_NAMES.values() if (value := _number(event.get(name))) is not None}
        return Terminated(
            cluster,
            at,
            int(event["ReturnValue"]) if normal else None,
            None if normal else _number(event.get("TerminatedBySignal")),  # type: ignore[arg-type]
            _cpu_seconds(event.get("RunRemoteUsage")),
            usage,
        )
    if code == EVICTED:
        return Evicted(cluster, at, _cpu_seconds(event.get("RunRemoteUsage")))
    if code == HELD:
        return Held(
            cluster, at, _str(event.get("HoldReason")), event.get("HoldReasonCode"), event.get("HoldReasonSubCode")
        )
    if code == ABORTED:
        return Aborted(cluster, at, _str(event.get("Reason")))
    if code == RELEASED:
        return Released(cluster, at)
    return None


def _execute_props(props: Any) -> dict[str, int | float]:
    found: dict[str, int | float] = {}
    if props is None:
        return found
    for name in _PROPS.values():
        try:
            value = _number(props.get(name))
        except (AttributeError, TypeError):
            return found
        if value is not None:
            found[name] = value
    return found


def _node_name(body: bytes) -> str | None:
    """The DAG node a submit event names; None for a job that is not a node (no note at all)."""
    if not body:
        return None
    note = _NOTE_AD.fullmatch(body) or _NOTE_LINE.fullmatch(body)
    if note is None:
        raise _Declined
    return note.group(1).decode("ascii")


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


def _held(body: bytes) -> tuple[Any, ...]:
    lines = body.split(b"\n")
    if len(lines) < 2:
        return Held, None, 0, 0
    reason = _text(lines[0].strip(_WHITESPACE))
    code = subcode = 0
    if len(lines) > 2:
        codes = _HOLD_CODES.fullmatch(lines[1])
        if codes is None:
            raise _Declined
        code, subcode = int(codes.group(1)), int(codes.group(2))
    return Held, reason if reason and reason != "Reason unspecified" else None, code, subcode


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


def _table_row(row: bytes, edges: tuple[int, int, int]) -> dict[str, int | float]:
    """The attributes in _TABLE_NAMES a usage table row sets (a row without a colon ends the table: the
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
    parsed: dict[str, int | float] = {}
    for name, cell in zip(names, cells, strict=False):
        value = _literal(cell)
        if value is not None and name in _TABLE_NAMES:
            parsed[_TABLE_NAMES[name]] = value
    return parsed


def _literal(cell: bytes) -> int | float | None:
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


def _cpu_seconds(text: Any) -> float | None:
    """`Usr D HH:MM:SS, Sys D HH:MM:SS` as seconds of user plus system time."""
    match = _USAGE_TEXT.search(text) if isinstance(text, str) else None
    return None if match is None else _cpu([part.encode() for part in match.groups()])


def _timestamp(when: bytes) -> float:
    """The event's time as JobEvent.timestamp has it: the header's local time through mktime (HTCondor's
    readHeader), back to local time (toClassAd's EventTime) and to an epoch by datetime (the bindings)."""
    if _ISO.fullmatch(when) is None:
        raise _Declined  # an old `MM/DD` date, a time zone
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


def _alias(sinful: Any) -> str | None:
    """The host of a sinful string `<127.0.0.1:40133?addrs=...&alias=vm>`: its alias, else its address."""
    if not isinstance(sinful, str):
        return None
    alias = re.search(r"alias=([^&>]+)", sinful)
    if alias:
        return alias.group(1)
    address = re.match(r"<([^:>?]+)", sinful)
    return address.group(1) if address else None


def _number(value: Any) -> int | float | None:
    """An int or a float as it is; None for anything else (a bool, a string, an expression)."""
    kind = type(value)
    return value if kind is int or kind is float else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# --- what status and usage read of it -------------------------------------------------------------------

# A segment-ending event's header: after a newline (a literal first, which the regex engine finds fast), or
# at the file's start (_FIRST_ENDING).
_ENDING = re.compile(rb"\n(00[45]|012) \((\d+)\.")
_FIRST_ENDING = re.compile(rb"(00[45]|012) \((\d+)\.")


def segment_key(cluster: int, kind: str, count: int) -> str:
    """The usage record key of a job's `count`-th evicted or held segment."""
    return f"{cluster}.{kind}{count}"


def segment_keys(data: bytes, counts: dict[tuple[bytes, int], int] | None = None) -> set[str]:
    """The keys every segment-ending event in the text would have (a cheap scan, no parsing of bodies).
    counts: the evictions and holds per job seen before `data` (a piece of the log), updated."""
    keys: set[str] = set()
    counts = {} if counts is None else counts
    first = _FIRST_ENDING.match(data)
    for code, number in ([first.groups()] if first else []) + _ENDING.findall(data):
        cluster = int(number)  # the header writes small ids with leading zeros (003): the record's key has none
        if code == b"005":
            keys.add(str(cluster))
            continue
        count = counts[code, cluster] = counts.get((code, cluster), 0) + 1
        keys.add(segment_key(cluster, "evicted" if code == b"004" else "held", count))
    return keys


def log_segment_keys(path: Path) -> set[str]:
    """segment_keys of the log's complete events, read a piece at a time; FileNotFoundError if no log."""
    keys: set[str] = set()
    counts: dict[tuple[bytes, int], int] = {}
    for piece in log_pieces(path):
        keys |= segment_keys(piece, counts)
    return keys


# Job-level states of a node's latest job, as status shows them.
QUEUED = "queued"
RUNNING = "running"
HELD_STATE = "held"
EXITED = "exited"
REMOVED = "removed"


@dataclass(slots=True)
class NodeJob:
    """What the event log says about a node's latest job (and how many jobs it had)."""

    cluster: int
    state: str = QUEUED
    jobs: int = 1  # submit events seen for this node: one per attempt
    evictions: int = 0
    holds: int = 0
    exit_code: int | None = None
    signal: int | None = None
    hold_reason: str | None = None
    hold_code: int | None = None
    hold_subcode: int | None = None
    removed_reason: str | None = None
    submitted: float | None = None
    started: float | None = None
    ended: float | None = None
    updated: float | None = None  # time of the latest event folded in (an image size event aside)


JOB_KINDS = tuple(kind for kind in ALL_KINDS if kind is not ImageSize)  # the kinds a job's state reads


def job_of(events: Iterable[Event], job: NodeJob | None = None) -> NodeJob | None:
    """The state of one job after these events of it (the DAGMan job, from its own log)."""
    for event in events:
        kind = type(event)
        if kind is Submitted:
            job = NodeJob(event.cluster, submitted=event.time, updated=event.time)
        elif job is not None and kind is not ImageSize:
            _fold(job, event)
    return job


def node_jobs(events: Iterable[Event]) -> dict[str, NodeJob]:
    """DAG node name -> its latest job (a DAGMan retry's job replaces the one before), from the nodes' log."""
    node_of: dict[int, NodeJob] = {}
    jobs: dict[str, NodeJob] = {}
    for event in events:
        kind = type(event)
        if kind is Submitted:
            name = event.node  # type: ignore[attr-defined]
            if name is None:
                continue  # not a DAG node job
            previous = jobs.get(name)
            job = jobs[name] = node_of[event.cluster] = NodeJob(event.cluster, submitted=event.time, updated=event.time)
            if previous is not None:
                job.jobs, job.holds, job.evictions = previous.jobs + 1, previous.holds, previous.evictions
        elif kind is not ImageSize and (job := node_of.get(event.cluster)) is not None:
            _fold(job, event)
    return jobs


def _fold(job: NodeJob, event: Event) -> None:
    job.updated = event.time
    kind = type(event)
    if kind is Executed:
        job.state, job.started = RUNNING, event.time
    elif kind is Terminated:
        job.state, job.ended = EXITED, event.time
        job.exit_code, job.signal = event.return_value, event.signal  # type: ignore[attr-defined]
    elif kind is Held:
        job.state = HELD_STATE
        job.holds += 1
        job.hold_reason, job.hold_code, job.hold_subcode = event.reason, event.code, event.subcode  # type: ignore[attr-defined]
    elif kind is Released:
        job.state = QUEUED
    elif kind is Evicted:
        job.state = QUEUED
        job.evictions += 1
    elif kind is Aborted:
        job.state, job.ended = REMOVED, event.time
        job.removed_reason = event.reason  # type: ignore[attr-defined]
