"""DAGMan's jobstate log (JOBSTATE_LOG): the DAG's history, one line per node event, appended.

Line formats, from the HTCondor manual ("Machine-Readable Event History"):

    timestamp INTERNAL *** DAGMAN_STARTED dagmanCondorID ***
    timestamp INTERNAL *** DAGMAN_FINISHED exitCode ***
    timestamp INTERNAL *** RECOVERY_STARTED ***            (and RECOVERY_FINISHED, RECOVERY_FAILURE)
    timestamp JobName eventName condorID jobTag - sequenceNumber

condorID is `cluster.proc`, `-` when there is none yet, and for JOB_SUCCESS / JOB_FAILURE the job's
exit code. sequenceNumber counts attempts at the node: a retry gets the next number, and a rescue DAG
carries on from where the previous run stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path

# Node events that change what status shows, and what it shows; others (IMAGE_SIZE, GENERIC...) only
# update the attempt bookkeeping.
EVENT_STATES = {
    "PRE_SCRIPT_STARTED": "running",
    "PRE_SCRIPT_SUCCESS": "queued",
    "PRE_SCRIPT_FAILURE": "failed",
    "SUBMIT": "queued",
    "SUBMIT_FAILURE": "queued",
    "EXECUTE": "running",
    "JOB_EVICTED": "queued",
    "JOB_HELD": "held",
    "JOB_RELEASED": "queued",
    "JOB_TERMINATED": "running",
    "JOB_ABORTED": "failed",
    "JOB_SUCCESS": "succeeded",
    "JOB_FAILURE": "failed",
    "POST_SCRIPT_STARTED": "running",
    "POST_SCRIPT_TERMINATED": "running",
    "POST_SCRIPT_SUCCESS": "succeeded",
    "POST_SCRIPT_FAILURE": "failed",
}

# Only the lines of EVENT_STATES' events: the others never reach Python.
_NODE_LINE = re.compile(
    rb"^(\d+) (\S+) (" + b"|".join(event.encode() for event in EVENT_STATES) + rb") (\S+) \S+ - (\d+)[ \t\r]*$",
    re.MULTILINE,
)
# Starts with its literal, which the regex engine finds fast; the timestamp before it is read separately.
_INTERNAL_LINE = re.compile(rb" INTERNAL \*\*\* (\w+)(?: (\S+))? \*\*\*")
_ENDED = (b"JOB_TERMINATED", b"JOB_ABORTED")
_VERDICTS = (b"JOB_SUCCESS", b"JOB_FAILURE")


@dataclass(slots=True)
class NodeHistory:
    event: str  # the node's latest event of EVENT_STATES, e.g. EXECUTE, JOB_HELD, JOB_FAILURE
    at: float  # its timestamp
    attempt: int  # the latest sequence number
    condor_id: str  # its condorID field (the exit code for JOB_SUCCESS / JOB_FAILURE)
    exit_code: int | None = None  # of the latest JOB_SUCCESS / JOB_FAILURE
    started: float | None = None  # EXECUTE of the latest attempt
    ended: float | None = None  # JOB_TERMINATED / JOB_ABORTED of the latest attempt


@dataclass(slots=True)
class JobstateLog:
    nodes: dict[str, NodeHistory] = field(default_factory=dict)
    dagman_ids: list[str] = field(default_factory=list)  # each DAGMAN_STARTED's dagmanCondorID
    started: float | None = None  # the first DAGMAN_STARTED
    last_started: float | None = None
    finished: float | None = None  # the DAGMAN_FINISHED after the latest DAGMAN_STARTED, if any
    exit_code: int | None = None  # of that DAGMAN_FINISHED

    @property
    def dagman_running(self) -> bool:
        return self.last_started is not None and self.finished is None


def parse_jobstate(data: bytes) -> JobstateLog:
    log = JobstateLog()
    _read_dagman_lines(data, log)
    # Per node: its latest line that changes its state (which carries the latest attempt number), and
    # its latest EXECUTE, end and verdict lines; dict(zip(...)) keeps the last per node, in C.
    rows = _NODE_LINE.findall(data)
    grouped: dict[bytes, list[tuple[bytes, ...]]] = {event.encode(): [] for event in EVENT_STATES}
    appenders = {event: group.append for event, group in grouped.items()}
    for row in rows:
        appenders[row[2]](row)
    name_of = itemgetter(1)

    def latest(*events: bytes) -> dict[bytes, tuple[bytes, ...]]:
        picked = grouped[events[0]] if len(events) == 1 else [row for row in rows if row[2] in events]
        return dict(zip(map(name_of, picked), picked, strict=True))

    stateful = dict(zip(map(name_of, rows), rows, strict=True))
    execute = latest(b"EXECUTE").get
    ended = (latest(*_ENDED) if grouped[b"JOB_ABORTED"] else latest(_ENDED[0])).get
    verdict = latest(*_VERDICTS).get
    nodes = log.nodes
    for name, state in stateful.items():
        attempt = state[4]
        history = NodeHistory(state[2].decode(), float(state[0]), int(attempt), state[3].decode())
        row = execute(name)
        if row is not None and row[4] == attempt:
            history.started = float(row[0])
        row = ended(name)
        if row is not None and row[4] == attempt:
            history.ended = float(row[0])
        row = verdict(name)
        if row is not None and row[4] == attempt and row[3].lstrip(b"-").isdigit():
            history.exit_code = int(row[3])
        nodes[name.decode("utf-8", "replace")] = history
    return log


def _read_dagman_lines(data: bytes, log: JobstateLog) -> None:
    for match in _INTERNAL_LINE.finditer(data):
        line_start = data.rfind(b"\n", 0, match.start()) + 1
        stamp = data[line_start : match.start()]
        if not stamp.isdigit():
            continue
        at, event, argument = float(stamp), match.group(1), match.group(2) or b""
        if event == b"DAGMAN_STARTED":
            log.dagman_ids.append(argument.decode())
            if log.started is None:
                log.started = at
            log.last_started = at
            log.finished = log.exit_code = None
        elif event == b"DAGMAN_FINISHED":
            log.finished = at
            log.exit_code = int(argument) if argument.lstrip(b"-").isdigit() else None


def read_jobstate(path: Path) -> JobstateLog | None:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return parse_jobstate(data)
