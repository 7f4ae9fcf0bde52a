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

_NODE_LINE = re.compile(rb"^(\d+) (\S+) (\S+) (\S+) \S+ - (\d+)\s*$", re.MULTILINE)
_INTERNAL_LINE = re.compile(rb"^(\d+) INTERNAL \*\*\* (\w+)(?: (\S+))? \*\*\*", re.MULTILINE)


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
    for stamp, event, argument in _INTERNAL_LINE.findall(data):
        at = float(stamp)
        if event == b"DAGMAN_STARTED":
            log.dagman_ids.append(argument.decode())
            if log.started is None:
                log.started = at
            log.last_started = at
            log.finished = log.exit_code = None
        elif event == b"DAGMAN_FINISHED":
            log.finished = at
            log.exit_code = int(argument) if argument.lstrip(b"-").isdigit() else None
    # Per node: its latest line that changes its state (which carries the latest attempt number), and
    # its latest EXECUTE, end and verdict lines; dict(zip(...)) keeps the last per node, in C.
    state_events = {event.encode() for event in EVENT_STATES}
    rows = [row for row in _NODE_LINE.findall(data) if row[2] in state_events]
    name_of = itemgetter(1)

    def latest(*events: bytes) -> dict[bytes, tuple[bytes, ...]]:
        picked = [row for row in rows if row[2] in events]
        return dict(zip(map(name_of, picked), picked, strict=True))

    stateful = dict(zip(map(name_of, rows), rows, strict=True))
    execute = latest(b"EXECUTE")
    ended = latest(b"JOB_TERMINATED", b"JOB_ABORTED")
    verdict = latest(b"JOB_SUCCESS", b"JOB_FAILURE")
    for name, state in stateful.items():
        attempt = state[4]
        history = NodeHistory(state[2].decode(), float(state[0]), int(attempt), state[3].decode())
        row = execute.get(name)
        if row is not None and row[4] == attempt:
            history.started = float(row[0])
        row = ended.get(name)
        if row is not None and row[4] == attempt:
            history.ended = float(row[0])
        row = verdict.get(name)
        if row is not None and row[4] == attempt and row[3].lstrip(b"-").isdigit():
            history.exit_code = int(row[3])
        log.nodes[name.decode("utf-8", "replace")] = history
    return log


def read_jobstate(path: Path) -> JobstateLog | None:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return parse_jobstate(data)
