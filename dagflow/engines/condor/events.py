"""The nodes' job event log (`dagflow.jobs.log`, every node job's `log =`), folded per DAG node.

A job event log is a sequence of events, each ended by a line `...`:

    000 (1234.000.000) 2025-03-01 14:25:01 Job submitted from host: <10.0.0.5:9618?...>
        DAG Node: train.us
    ...
    000 (1235.000.000) 2026-11-24 01:53:00 Job submitted from host: <127.0.0.1:37147?...>
        [ DAGNodeName = "train.br"; JobBatchName = "region-retrain-20261124-015254-2dac" ]
    ...
    012 (1234.000.000) 2025-03-01 14:26:00 Job was held.
        Error from slot1@gpu1: memory limit exceeded
        Code 34 Subcode 0
    ...

The node name is in the log only in the submit event (`DAG Node: name` before HTCondor 25, a
`[ DAGNodeName = "name"; ... ]` note since),
so later events are tied to a node through their cluster id. `htcondor2.JobEventLog` reads this
format, but spends about 10 µs per event; `scan_events` reads only the header line, the line after
it and a hold's `Code` line of the events status needs, with one regular expression over the whole
file, and the tests check that it agrees with JobEventLog on every event kind it handles.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import BinaryIO

from dagflow.gc_pause import gc_paused

SUBMIT, EXECUTE, EVICTED, TERMINATED, ABORTED, HELD, RELEASED = 0, 1, 4, 5, 9, 12, 13

# Job-level states of a node's latest job, as status shows them.
QUEUED = "queued"
RUNNING = "running"
HELD_STATE = "held"
EXITED = "exited"
REMOVED = "removed"

# An event of interest: header `NNN (cluster.proc.subproc) DATE TIME text`, then the next line of its
# body (never the `...` that ends it), and a hold's `Code N Subcode M` line after that. Every event but
# the file's first follows a `...` line; searching for that literal prefix is what makes the scan fast.
_BODY = (
    rb"(0(?:00|01|04|05|09|12|13)) \((\d+)\.\d+\.\d+\) (\S+ \S+)[^\n]*"
    rb"(?:\n(?!\.\.\.)([^\n]*)(?:\n([ \t]*Code [^\n]*))?)?"
)
_EVENT = re.compile(rb"\.\.\.\n" + _BODY)
_FIRST_EVENT = re.compile(_BODY)
_SIGNAL = re.compile(r"\(signal (\d+)\)")
_HOLD_CODE = re.compile(r"Code (-?\d+) Subcode (-?\d+)")
_DAG_NODE = b"DAG Node: "
# HTCondor 25 writes the submit event's note as a ClassAd: `[ DAGNodeName = "train.us"; JobBatchName = ... ]`
# (node names hold no quotes: DAGMan refuses them).
_DAG_NODE_AD = b'DAGNodeName = "'
_CODES = (b"000", b"001", b"004", b"005", b"009", b"012", b"013")


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
    updated: float | None = None  # time of the latest event folded in


_STATE_AFTER = {
    b"000": QUEUED,
    b"001": RUNNING,
    b"004": QUEUED,
    b"005": EXITED,
    b"009": REMOVED,
    b"012": HELD_STATE,
    b"013": QUEUED,
}


_STATE_AFTER_CODE = {int(code) for code in _STATE_AFTER}


class _Clock(dict[bytes, float | None]):
    """Event times as epoch seconds, looked up by their text: one conversion per distinct timestamp."""

    def __init__(self) -> None:
        super().__init__()
        self._year = time.localtime().tm_year

    def __missing__(self, raw: bytes) -> float | None:
        value = self[raw] = self._parse(raw.decode("ascii", "replace"))
        return value

    def _parse(self, text: str) -> float | None:
        date, _, clock = text.partition(" ")
        try:
            hms = clock.split(".")[0].split("+")[0].rstrip("Z")
            hour, minute, second = (int(part) for part in hms.split(":"))
            if "-" in date:  # ISO date (the default since HTCondor 9)
                year, month, day = (int(part) for part in date.split("-"))
            else:  # MM/DD: the year is not logged
                month, day = (int(part) for part in date.split("/"))
                year = self._year
            stamp = time.mktime((year, month, day, hour, minute, second, 0, 0, -1))
        except (ValueError, OverflowError):
            return None
        if "/" in date and stamp > time.time() + 86400:
            stamp = time.mktime((year - 1, month, day, hour, minute, second, 0, 0, -1))
        return stamp


def scan_events(data: bytes) -> dict[str, NodeJob]:
    """DAG node name -> its latest job, from the text of a job event log."""
    with gc_paused():
        first = _FIRST_EVENT.match(data)
        return _scan_events(([first.groups(default=b"")] if first else []) + _EVENT.findall(data))


def _scan_events(matches: list[tuple[bytes, ...]]) -> dict[str, NodeJob]:
    # Group the events by kind (file order kept), then key each group by cluster: the last event of a
    # kind per cluster wins. dict(zip(...)) does that in C; the loop below runs once per job, not per event.
    grouped: dict[bytes, list[tuple[bytes, ...]]] = {code: [] for code in _CODES}
    appenders = {code: events.append for code, events in grouped.items()}
    for match in matches:
        appenders[match[0]](match)
    cluster_of = itemgetter(1)
    latest = dict(zip(map(cluster_of, matches), matches, strict=True))
    by_code = {code: dict(zip(map(cluster_of, events), events, strict=True)) for code, events in grouped.items()}
    # .get, not Counter's []: a miss there is a Python-level __missing__ call per job
    holds = Counter(map(cluster_of, grouped[b"012"])).get
    evictions = Counter(map(cluster_of, grouped[b"004"])).get
    executed, terminated = by_code[b"001"].get, by_code[b"005"].get
    held, aborted = by_code[b"012"].get, by_code[b"009"].get
    times = _Clock()
    jobs: dict[str, NodeJob] = {}
    previous_of = jobs.get
    name_from, ad_name_from = len(_DAG_NODE), len(_DAG_NODE_AD)
    for submit in grouped[b"000"]:  # in file order: a node's later job (a DAGMan retry) replaces its earlier one
        cluster = submit[1]
        note = submit[3]
        at = note.find(_DAG_NODE)
        if at >= 0:
            name = note[at + name_from :].strip().decode("utf-8", "replace")
        elif (at := note.find(_DAG_NODE_AD)) >= 0:
            end = note.find(b'"', at + ad_name_from)
            name = note[at + ad_name_from : end].decode("utf-8", "replace")
        else:
            continue  # not a DAG node job
        last = latest[cluster]
        exit_code = signal = started = ended = None
        if event := executed(cluster):
            started = times[event[2]]
        if event := terminated(cluster):
            ended = times[event[2]]
            line = event[3]
            at = line.find(b"(return value ")
            if at >= 0:
                exit_code = int(line[at + 14 : line.index(b")", at)])
            elif killed := _SIGNAL.search(line.decode("utf-8", "replace")):
                signal = int(killed.group(1))
        job = NodeJob(
            int(cluster),
            _STATE_AFTER[last[0]],
            1,
            evictions(cluster, 0),
            holds(cluster, 0),
            exit_code,
            signal,
            submitted=times[submit[2]],
            started=started,
            ended=ended,
            updated=times[last[2]],
        )
        if event := held(cluster):
            job.hold_reason = event[3].decode("utf-8", "replace").strip() or None
            code = _HOLD_CODE.search(event[4].decode("utf-8", "replace"))
            if code:
                job.hold_code, job.hold_subcode = int(code.group(1)), int(code.group(2))
        if event := aborted(cluster):
            job.ended = times[event[2]]
            job.removed_reason = event[3].decode("utf-8", "replace").strip() or None
        if (previous := previous_of(name)) is not None:
            job.jobs += previous.jobs
            job.holds += previous.holds
            job.evictions += previous.evictions
        jobs[name] = job
    return jobs


PIECE = 8 << 20  # bytes of the log read at a time
_SYNC = b"\n...\n"


def read_events(path: Path) -> dict[str, NodeJob]:
    """scan_events over a file, read a piece at a time (a 100k-node run's log is 150 MB: its text is never
    all held); a log not written yet reads as no events."""
    try:
        log = open(path, "rb")  # noqa: SIM115  # closed below
    except FileNotFoundError:
        return {}
    with log, gc_paused():
        matches: list[tuple[bytes, ...]] = []
        for piece in _pieces(log):
            # a piece begins after an event's `...` line (or at the file's start): scan_events' matches exactly
            matches += _EVENT.findall(b"...\n" + piece)
        return _scan_events(matches)


def _pieces(log: BinaryIO) -> Iterator[bytes]:
    """The file's text in pieces of about PIECE bytes, each but the last ending with a `...` line."""
    rest = b""
    while block := log.read(PIECE):
        data = rest + block if rest else block
        end = data.rfind(_SYNC)
        if end < 0:
            rest = data
            continue
        yield data[: end + len(_SYNC)]
        rest = data[end + len(_SYNC) :]
    if rest:
        yield rest  # an event still being written, as scan_events of the whole text reads it


def read_events_with_bindings(path: Path) -> dict[str, NodeJob]:
    """The same fold over htcondor2.JobEventLog: the reference scan_events is checked against."""
    import htcondor2

    node_of: dict[int, str] = {}
    jobs: dict[str, NodeJob] = {}
    for event in htcondor2.JobEventLog(str(path)).events(0):
        code = int(event.type)
        when = float(event.timestamp)
        if code == SUBMIT:
            structured = event.get("StructuredNotes")  # HTCondor 25: [ DAGNodeName = "..."; ... ]
            notes = event.get("LogNotes") or ""
            if structured is not None and "DAGNodeName" in structured:
                name = str(structured["DAGNodeName"])
            elif notes.startswith("DAG Node: "):
                name = notes[len("DAG Node: ") :].strip()
            else:
                continue
            node_of[event.cluster] = name
            previous = jobs.get(name)
            job = jobs[name] = NodeJob(event.cluster, submitted=when, updated=when)
            if previous is not None:
                job.jobs, job.holds, job.evictions = previous.jobs + 1, previous.holds, previous.evictions
            continue
        name = node_of.get(event.cluster)
        if name is None:
            continue
        job = jobs[name]
        if code in _STATE_AFTER_CODE:
            job.updated = when
        if code == EXECUTE:
            job.state, job.started = RUNNING, when
        elif code == TERMINATED:
            job.state, job.ended = EXITED, when
            if event.get("TerminatedNormally"):
                job.exit_code = int(event["ReturnValue"])
            else:
                job.signal = event.get("TerminatedBySignal")
        elif code == HELD:
            job.state = HELD_STATE
            job.holds += 1
            job.hold_reason = event.get("HoldReason")
            job.hold_code, job.hold_subcode = event.get("HoldReasonCode"), event.get("HoldReasonSubCode")
        elif code == RELEASED:
            job.state = QUEUED
        elif code == EVICTED:
            job.state = QUEUED
            job.evictions += 1
        elif code == ABORTED:
            job.state, job.ended = REMOVED, when
            job.removed_reason = event.get("Reason")
    return jobs
