"""What each node job used on HTCondor, from the nodes' job event log (event_log.py), into usage.jsonl.

A node's job runs in segments: from an execute event (001) to the event that ends the run, one of
terminated (005), evicted (004) or held while running (012). Each segment is one usage record:

- terminated: the event's own Usage / Request / Allocated table (`CpusUsage`, `RequestCpus`, `Cpus`;
  `MemoryUsage`, `RequestMemory`, `Memory` in MB; `DiskUsage`, `RequestDisk`, `Disk` in KB; `GPUs`,
  `RequestGPUs`), its `RunRemoteUsage` (user and system CPU time of the run, whole seconds) and
  `TimeExecuteUsage`; `GPUsMemoryUsage` and `GPUsUsage` where the pool monitors GPUs;
- evicted or held: the latest image-size event's `MemoryUsage` (HTCondor's peak resident set while the
  job ran, sampled every STARTER_UPDATE_INTERVAL), the evicted event's run usage, the allocation of the
  execute event, and reason `evicted` or `held: <HoldReason>`; dagflow's own memory hold (code 3,
  subcode 1717, see the submit writer) is reason `oom`.

The host and slot come from the execute event (`SlotName` slot@host). The record's `key` is the job's
cluster id (with the segment's event for an evicted or held one), so a segment is recorded once however
often, and however concurrently, status reads the log; `attempt` numbers a node's segments in log order.
Times are the events' (whole seconds): wall_s is TimeExecuteUsage where given, else execute to end. Not
for a self-checkpointing step's job: it restarts in place, each restart one more execution of the same
activation, and TimeExecute counts the last execution alone (the shadow resets its start at each one),
while RunRemoteUsage counts them all (on the pool: 8 s of a 28 s, three-epoch run with 18 CPU seconds,
which read as 2.25 cores used of 2). Its wall_s is execute to end.

The log is parsed only when a cheap scan of it (segment_keys) finds an event that ends a segment and has
no record yet, and then only the events of those jobs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from dagflow.engines.condor import event_log as ev
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.run.usage import (
    HELD_PREFIX,
    REASON_EVICTED,
    REASON_KILLED,
    REASON_OOM,
    NodeUsage,
    encode_usage,
    read_usage,
    record_lines_once,
    renumber_line,
    requested_of,
    usage_path,
)

KB_PER_MB = 1024
# dagflow's periodic hold of a job over its memory (submit_writer.py): HoldReasonCode 3, this subcode
MEMORY_HOLD_SUBCODE = 1717
_FIELDS = {"Cpus": "cpus", "Memory": "memory_mb", "Disk": "disk_mb", "GPUs": "gpus"}
_UNITS = {"Cpus": 1, "Memory": 1, "Disk": KB_PER_MB, "GPUs": 1}


@dataclass(slots=True)
class _Job:
    node: str
    step: str
    started: float | None = None
    host: str | None = None
    slot: str | None = None
    allocated: dict[str, float] = field(default_factory=dict)
    memory_mb: float | None = None  # the latest image-size event's MemoryUsage in this run
    evictions: int = 0
    holds: int = 0


def _step_of(plan: Plan | PlanIndex, node: str) -> str | None:
    """A node's step; None for a node not in the plan."""
    if isinstance(plan, PlanIndex):
        position = plan.position.get(node)
        return None if position is None else plan.step(position)
    found = plan.nodes.get(node)
    return None if found is None else found.step


def usage_records(events: Iterable[ev.Event], plan: Plan | PlanIndex) -> Iterator[NodeUsage]:
    """One record per segment, in log order, one at a time (a big log's are never all held at once)."""
    jobs: dict[int, _Job] = {}
    attempts: dict[str, int] = {}
    requests: dict[str, dict[str, float]] = {}
    for event in events:
        kind = type(event)
        cluster = event.cluster
        if kind is ev.Submitted:
            name = event.node  # type: ignore[attr-defined]
            if name is not None and (step := _step_of(plan, name)) is not None:
                jobs[cluster] = _Job(name, step)
            continue
        job = jobs.get(cluster)
        if job is None:
            continue
        if kind is ev.Executed:
            job.started = event.time
            job.slot, job.host = event.slot, event.host  # type: ignore[attr-defined]
            job.allocated, job.memory_mb = _allocation(event.props), None  # type: ignore[attr-defined]
        elif kind is ev.ImageSize:
            if job.started is not None:
                job.memory_mb = event.memory_mb  # type: ignore[attr-defined]
        elif kind is ev.Terminated or kind is ev.Evicted or kind is ev.Held:
            if kind is ev.Evicted:
                job.evictions += 1
            elif kind is ev.Held:
                job.holds += 1
            if job.started is None:  # held while idle: nothing ran
                continue
            attempts[job.node] = attempt = attempts.get(job.node, 0) + 1
            yield _record(event, cluster, job, attempt, plan, requests)
            job.started = None


def _allocation(props: dict[str, int | float]) -> dict[str, float]:
    """What an execute event's ExecuteProps say the slot gave the job (Disk in KB)."""
    return {_FIELDS[name]: props[name] / unit for name, unit in _UNITS.items() if name in props}


def _record(
    event: ev.Event,
    cluster: int,
    job: _Job,
    attempt: int,
    plan: Plan | PlanIndex,
    requests: dict[str, dict[str, float]],
) -> NodeUsage:
    """The record of the segment `event` ends. requests: each step's requested_of, kept across calls (a
    copy is the record's)."""
    ended = event.time
    started = job.started
    step = job.step
    known = requests.get(step)
    if known is None:
        known = requests[step] = requested_of(plan.steps[step].resources)
    requested = dict(known)
    allocated = dict(job.allocated)
    extra: dict[str, float | str] = {"cluster": str(cluster)}
    wall = ended - started if started is not None else None
    peak = job.memory_mb
    gpu_memory = gpu_utilization = None
    exit_code: int | None = None
    reason: str | None = None
    if isinstance(event, ev.Terminated):
        key = str(cluster)
        usage = event.usage
        for name, unit in _UNITS.items():
            asked, given = usage.get(f"Request{name}"), usage.get(name)
            if asked is not None:
                requested[_FIELDS[name]] = asked / unit
            if given is not None:
                allocated[_FIELDS[name]] = given / unit
        peak = usage.get("MemoryUsage", job.memory_mb)
        if (disk := usage.get("DiskUsage")) is not None:
            extra["disk_used_mb"] = round(disk / KB_PER_MB, 1)
        if (cpus_used := usage.get("CpusUsage")) is not None:
            extra["cpus_usage"] = cpus_used
        executed = usage.get("TimeExecuteUsage")
        if executed is not None and executed > 0 and plan.steps[step].checkpoint_exit_code is None:
            wall = executed
        gpu_memory = usage.get("GPUsMemoryUsage")
        if (gpus_usage := usage.get("GPUsUsage")) is not None:
            gpu_utilization = round(100 * gpus_usage / max(allocated.get("gpus", 1) or 1, 1), 1)
        if event.return_value is not None:
            exit_code = event.return_value
        else:
            exit_code = -int(event.signal) if event.signal is not None else None
            reason = REASON_KILLED
        cpu = event.cpu_s
    elif isinstance(event, ev.Evicted):
        key = ev.segment_key(cluster, "evicted", job.evictions)
        reason = REASON_EVICTED
        cpu = event.cpu_s
    else:
        assert isinstance(event, ev.Held)
        key = ev.segment_key(cluster, "held", job.holds)
        if event.code == 3 and event.subcode == MEMORY_HOLD_SUBCODE:
            reason = REASON_OOM
        else:
            reason = HELD_PREFIX + (event.reason or "no reason given")
        if event.reason:
            extra["hold_reason"] = event.reason
        cpu = None
    return NodeUsage(
        node=job.node,
        step=step,
        attempt=attempt,
        engine="condor",
        started=started,
        ended=ended,
        wall_s=wall,
        cpu_s=cpu,
        peak_memory_mb=peak,
        gpu_memory_peak_mb=gpu_memory,
        gpu_utilization_pct=gpu_utilization,
        host=job.host,
        slot=job.slot,
        requested=requested,
        allocated=allocated,
        exit_code=exit_code,
        reason=reason,
        extra=extra,
        key=key,
    )


class Line(NamedTuple):
    """A record as usage.jsonl holds it (encode_usage's line), with what deduplicating and numbering it reads."""

    node: str
    key: str
    attempt: int
    text: bytes


def read_records(path: Path, plan: Plan | PlanIndex, clusters: set[int] | None = None) -> list[Line]:
    """One record per segment of these jobs (every job's when None), in log order, as its line. Kept as
    lines, not NodeUsage objects: a 100k-node run's are 50 MB, not 150."""
    return [
        Line(record.node, record.key or "", record.attempt, encode_usage(record))
        for record in usage_records(ev.read_events(path, clusters), plan)
    ]


# The key of a complete condor record line as encode_usage writes it (`key` is its last field).
_RECORDED_KEY = re.compile(rb'"engine":"condor",[^\n]*,"key":"([^"\\\n]*)"\}$', re.MULTILINE)


def record_condor_usage(run_dir: Path, plan: Plan | PlanIndex, event_log: Path) -> int:
    """Append the records of segments the log ends and usage.jsonl lacks; how many were appended.

    Only the events of the jobs with a new segment are parsed (a big run's log holds hundreds of
    thousands), and only the recorded lines of their nodes decoded; a node's new records are numbered on
    from its recorded ones.
    """
    try:
        ending = ev.log_segment_keys(event_log)
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
            numbered.append(
                line
                if line.attempt == attempt
                else line._replace(attempt=attempt, text=renumber_line(line.text, attempt))
            )
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
