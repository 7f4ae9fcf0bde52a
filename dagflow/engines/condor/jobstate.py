"""DAGMan's jobstate log (JOBSTATE_LOG): the DAG's history, one line per node event, appended.

Line formats, from the HTCondor manual ("Machine-Readable Event History"):

    timestamp INTERNAL *** DAGMAN_STARTED dagmanCondorID ***
    timestamp INTERNAL *** DAGMAN_FINISHED exitCode ***
    timestamp INTERNAL *** RECOVERY_STARTED ***            (and RECOVERY_FINISHED, RECOVERY_FAILURE)
    timestamp JobName eventName condorID jobTag - sequenceNumber

condorID is `cluster.proc`, `-` when there is none yet, and for JOB_SUCCESS / JOB_FAILURE the job's
exit code. sequenceNumber numbers DAGMan's job submissions across the whole DAG, not per node: the
lines of one submission (SUBMIT, EXECUTE, JOB_TERMINATED, JOB_FAILURE...) share it, and a retry gets
a new one (tests/data/condor-pool/region-retrain.jobstate.log, written by a real pool: stage.us is
submitted as 1, 5 and 10). So a node's attempts are its SUBMIT lines, counted both over the whole log
and since the latest DAGMAN_STARTED (a rescue DAG gives a failed node its retries again).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from itertools import pairwise
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
_SUBMIT = b"SUBMIT"
_ENDED = (b"JOB_TERMINATED", b"JOB_ABORTED")
_VERDICTS = (b"JOB_SUCCESS", b"JOB_FAILURE")


@dataclass(slots=True)
class NodeHistory:
    event: str  # the node's latest event of EVENT_STATES, e.g. EXECUTE, JOB_HELD, JOB_FAILURE
    at: float  # its timestamp
    attempt: int  # its jobs submitted (SUBMIT lines), in every DAGMan run of the log
    condor_id: str  # its condorID field (the exit code for JOB_SUCCESS / JOB_FAILURE)
    exit_code: int | None = None  # of the latest JOB_SUCCESS / JOB_FAILURE
    started: float | None = None  # EXECUTE of the latest attempt
    ended: float | None = None  # JOB_TERMINATED / JOB_ABORTED of the latest attempt
    run_attempts: int = 0  # its jobs submitted since the latest DAGMAN_STARTED


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
    run_starts = _read_dagman_lines(data, log)
    # One DAGMan run after another: a sequence number names one submission only within its run.
    bounds = [0, *run_starts[1:], len(data)] if run_starts else [0, len(data)]
    runs = [_parse_run(data, start, end) for start, end in pairwise(bounds)]
    nodes = log.nodes
    for index, run in enumerate(runs):
        latest_run = index == len(runs) - 1
        for name, (history, attempts) in run.items():
            earlier = nodes.get(name)
            history.attempt = attempts + (earlier.attempt if earlier is not None else 0)
            history.run_attempts = attempts if latest_run else 0
            nodes[name] = history
    return log


def _parse_run(data: bytes, start: int, end: int) -> dict[str, tuple[NodeHistory, int]]:
    """Each node's history in one DAGMan run's lines (data[start:end]), and the attempts it began there."""
    # Per node: its latest line that changes its state (which carries its submission's sequence number),
    # and its latest EXECUTE, end and verdict lines; dict(zip(...)) keeps the last per node, in C.
    rows = _NODE_LINE.findall(data, start, end)
    grouped: dict[bytes, list[tuple[bytes, ...]]] = {event.encode(): [] for event in EVENT_STATES}
    appenders = {event: group.append for event, group in grouped.items()}
    for row in rows:
        appenders[row[2]](row)
    name_of = itemgetter(1)

    def latest(*events: bytes) -> dict[bytes, tuple[bytes, ...]]:
        picked = grouped[events[0]] if len(events) == 1 else [row for row in rows if row[2] in events]
        return dict(zip(map(name_of, picked), picked, strict=True))

    stateful = dict(zip(map(name_of, rows), rows, strict=True))
    submits = Counter(map(name_of, grouped[_SUBMIT])).get
    pre_scripts = Counter(map(name_of, grouped[b"PRE_SCRIPT_STARTED"])).get
    execute = latest(b"EXECUTE").get
    ended = (latest(*_ENDED) if grouped[b"JOB_ABORTED"] else latest(_ENDED[0])).get
    verdict = latest(*_VERDICTS).get
    histories: dict[str, tuple[NodeHistory, int]] = {}
    for name, state in stateful.items():
        sequence = state[4]
        history = NodeHistory(state[2].decode(), float(state[0]), 0, state[3].decode())
        row = execute(name)
        if row is not None and row[4] == sequence:
            history.started = float(row[0])
        row = ended(name)
        if row is not None and row[4] == sequence:
            history.ended = float(row[0])
        row = verdict(name)
        if row is not None and row[4] == sequence and row[3].lstrip(b"-").isdigit():
            history.exit_code = int(row[3])
        # An attempt begins with its PRE script, if the node has one, else with its SUBMIT.
        attempts = max(submits(name, 0), pre_scripts(name, 0), 1)
        histories[name.decode("utf-8", "replace")] = (history, attempts)
    return histories


def _read_dagman_lines(data: bytes, log: JobstateLog) -> list[int]:
    """Reads the INTERNAL lines into log; returns where each DAGMAN_STARTED line begins."""
    run_starts: list[int] = []
    for match in _INTERNAL_LINE.finditer(data):
        line_start = data.rfind(b"\n", 0, match.start()) + 1
        stamp = data[line_start : match.start()]
        if not stamp.isdigit():
            continue
        at, event, argument = float(stamp), match.group(1), match.group(2) or b""
        if event == b"DAGMAN_STARTED":
            run_starts.append(line_start)
            log.dagman_ids.append(argument.decode())
            if log.started is None:
                log.started = at
            log.last_started = at
            log.finished = log.exit_code = None
        elif event == b"DAGMAN_FINISHED":
            log.finished = at
            log.exit_code = int(argument) if argument.lstrip(b"-").isdigit() else None
    return run_starts


def read_jobstate(path: Path) -> JobstateLog | None:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return parse_jobstate(data)
