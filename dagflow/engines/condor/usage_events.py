"""What each node job used on HTCondor, from the nodes' job event log, into the run's usage.jsonl.

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

This module makes the records from htcondor2.JobEventLog's events; usage_log.py reads the same records
from the log's text, faster, and records them (record_condor_usage): the log is parsed only when a cheap
scan of it (segment_keys) finds an event that ends a segment and has no record yet, and then only the
events of those jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.engines.condor import events as ev
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.run.usage import (
    HELD_PREFIX,
    REASON_EVICTED,
    REASON_KILLED,
    REASON_OOM,
    NodeUsage,
    requested_of,
)

IMAGE_SIZE = 6
KB_PER_MB = 1024
# dagflow's periodic hold of a job over its memory (submit_writer.py): HoldReasonCode 3, this subcode
MEMORY_HOLD_SUBCODE = 1717
# A segment-ending event's header: after a newline (a literal first, which the regex engine finds fast), or
# at the file's start (_FIRST_ENDING).
_ENDING = re.compile(rb"\n(00[45]|012) \((\d+)\.")
_FIRST_ENDING = re.compile(rb"(00[45]|012) \((\d+)\.")
_USAGE = re.compile(r"Usr (\d+) (\d+):(\d+):(\d+), Sys (\d+) (\d+):(\d+):(\d+)")


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


def segment_keys(data: bytes, counts: dict[tuple[bytes, int], int] | None = None) -> set[str]:
    """The keys every segment-ending event in the log would have (a cheap scan, no parsing of bodies).
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
        keys.add(_segment_key(cluster, "evicted" if code == b"004" else "held", count))
    return keys


def _segment_key(cluster: int, kind: str, count: int) -> str:
    return f"{cluster}.{kind}{count}"


def _parsed_events(path: Path, event_log: Path) -> Iterator[Any]:
    """The events of path, parsed by htcondor2.JobEventLog one at a time (a big log's are never all held at
    once); ValueError, naming event_log, when it cannot read them."""
    import htcondor2

    try:
        yield from htcondor2.JobEventLog(str(path)).events(0)
    except htcondor2.HTCondorException as error:
        raise ValueError(f"{event_log}: {error}") from None


def usage_records(events: Iterable[Any], plan: Plan | PlanIndex) -> list[NodeUsage]:
    """One record per segment, in log order, from JobEventLog events."""
    return list(iter_usage_records(events, plan))


def iter_usage_records(events: Iterable[Any], plan: Plan | PlanIndex) -> Iterator[NodeUsage]:
    """usage_records, one record at a time (a big log's are never all held at once)."""
    jobs: dict[int, _Job] = {}
    attempts: dict[str, int] = {}
    for event in events:
        code = int(event.type)
        cluster = event.cluster
        if code == ev.SUBMIT:
            name = _node_name(event)
            if name is not None and (step := _step_of(plan, name)) is not None:
                jobs[cluster] = _Job(name, step)
            continue
        job = jobs.get(cluster)
        if job is None:
            continue
        if code == ev.EXECUTE:
            job.started = float(event.timestamp)
            job.slot = _str(event.get("SlotName"))
            job.host = job.slot.split("@", 1)[1] if job.slot and "@" in job.slot else _alias(event.get("ExecuteHost"))
            job.allocated = _execute_allocation(event.get("ExecuteProps"))
            job.memory_mb = None
        elif code == IMAGE_SIZE and job.started is not None:
            job.memory_mb = _number(event.get("MemoryUsage"))
        elif code in (ev.TERMINATED, ev.EVICTED, ev.HELD):
            if code == ev.EVICTED:
                job.evictions += 1
            elif code == ev.HELD:
                job.holds += 1
            if job.started is None:  # held while idle: nothing ran
                continue
            attempts[job.node] = attempt = attempts.get(job.node, 0) + 1
            yield _record(event, code, cluster, job, attempt, plan, _cpu_seconds(event.get("RunRemoteUsage")))
            job.started = None


def _record(
    event: Any,
    code: int,
    cluster: int,
    job: _Job,
    attempt: int,
    plan: Plan | PlanIndex,
    cpu: float | None,
    requests: dict[str, dict[str, float]] | None = None,
) -> NodeUsage:
    """The record of the segment `event` ends. cpu: the run's CPU seconds (the event's RunRemoteUsage);
    requests: each step's requested_of, kept across calls (a copy is the record's)."""
    ended = float(event.timestamp)
    started = job.started
    step = job.step
    if requests is None:
        requested = requested_of(plan.steps[step].resources)
    else:
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
    if code == ev.TERMINATED:
        key = str(cluster)
        for name, unit in (("Cpus", 1), ("Memory", 1), ("Disk", KB_PER_MB), ("GPUs", 1)):
            asked, given = _number(event.get(f"Request{name}")), _number(event.get(name))
            field_name = _FIELDS[name]
            if asked is not None:
                requested[field_name] = asked / unit
            if given is not None:
                allocated[field_name] = given / unit
        peak = _number(event.get("MemoryUsage"))
        if peak is None:
            peak = job.memory_mb
        disk = _number(event.get("DiskUsage"))
        if disk is not None:
            extra["disk_used_mb"] = round(disk / KB_PER_MB, 1)
        cpus_used = _number(event.get("CpusUsage"))
        if cpus_used is not None:
            extra["cpus_usage"] = cpus_used
        executed = _number(event.get("TimeExecuteUsage"))
        if executed is not None and executed > 0 and plan.steps[step].checkpoint_exit_code is None:
            wall = executed
        gpu_memory = _number(event.get("GPUsMemoryUsage"))
        gpus_usage = _number(event.get("GPUsUsage"))
        if gpus_usage is not None:
            gpu_utilization = round(100 * gpus_usage / max(allocated.get("gpus", 1) or 1, 1), 1)
        if event.get("TerminatedNormally"):
            exit_code = int(event["ReturnValue"])
        else:
            signal = _number(event.get("TerminatedBySignal"))
            exit_code = -int(signal) if signal is not None else None
            reason = REASON_KILLED
    elif code == ev.EVICTED:
        key = _segment_key(cluster, "evicted", job.evictions)
        reason = REASON_EVICTED
    else:
        key = _segment_key(cluster, "held", job.holds)
        subcode = event.get("HoldReasonSubCode")
        if event.get("HoldReasonCode") == 3 and subcode == MEMORY_HOLD_SUBCODE:
            reason = REASON_OOM
        else:
            reason = HELD_PREFIX + (_str(event.get("HoldReason")) or "no reason given")
        hold_reason = _str(event.get("HoldReason"))
        if hold_reason:
            extra["hold_reason"] = hold_reason
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


_FIELDS = {"Cpus": "cpus", "Memory": "memory_mb", "Disk": "disk_mb", "GPUs": "gpus"}


def _execute_allocation(props: Any) -> dict[str, float]:
    """What the execute event's ExecuteProps say the slot gave the job (Disk in KB)."""
    allocated: dict[str, float] = {}
    if props is None:
        return allocated
    for name, unit in (("Cpus", 1), ("Memory", 1), ("Disk", KB_PER_MB), ("GPUs", 1)):
        try:
            value = _number(props.get(name))
        except (AttributeError, TypeError):
            return allocated
        if value is not None:
            allocated[_FIELDS[name]] = value / unit
    return allocated


def _node_name(event: Any) -> str | None:
    structured = event.get("StructuredNotes")  # HTCondor 25: [ DAGNodeName = "..."; ... ]
    if structured is not None and "DAGNodeName" in structured:
        return str(structured["DAGNodeName"])
    notes = event.get("LogNotes") or ""
    if notes.startswith("DAG Node: "):
        return notes[len("DAG Node: ") :].strip()
    return None


def _cpu_seconds(text: Any) -> float | None:
    """`Usr D HH:MM:SS, Sys D HH:MM:SS` as seconds of user plus system time."""
    match = _USAGE.search(text) if isinstance(text, str) else None
    if match is None:
        return None
    d1, h1, m1, s1, d2, h2, m2, s2 = (int(part) for part in match.groups())
    return float((d1 + d2) * 86400 + (h1 + h2) * 3600 + (m1 + m2) * 60 + s1 + s2)


def _alias(sinful: Any) -> str | None:
    """The host of a sinful string `<127.0.0.1:40133?addrs=...&alias=vm>`: its alias, else its address."""
    if not isinstance(sinful, str):
        return None
    alias = re.search(r"alias=([^&>]+)", sinful)
    if alias:
        return alias.group(1)
    address = re.match(r"<([^:>?]+)", sinful)
    return address.group(1) if address else None


def _number(value: Any) -> float | None:
    """An int or a float as it is; None for anything else (a bool, a string, an expression)."""
    kind = type(value)
    return value if kind is int or kind is float else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
