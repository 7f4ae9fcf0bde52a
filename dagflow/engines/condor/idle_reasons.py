"""Why a condor run's idle node jobs do not start: `condor_q -better-analyze`, boiled down to one line.

Where no slot is willing now, pool_fit.py's rule tells the two stories apart: the job waits for busy
slots (a machine, whole, would run it: its GPUs that match run other jobs), or it never runs in this pool
(no machine could), with why.

`dagflow status` reads a run from files; only jobs still idle in the queue are worth asking the schedd
about. A step's jobs share one submit file (so one requirements expression), so one analysis per step
stands for all of that step's idle jobs, and a run with many idle jobs costs a few condor_q calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import classad2

from dagflow.engines.condor import event_log as ev
from dagflow.engines.condor import pool_fit
from dagflow.engines.condor.records import CondorRecord
from dagflow.plan.index import PlanIndex
from dagflow.run.journal import NodeRecord
from dagflow.run.status import QUEUED

MAX_STEPS = 8  # analyses per `dagflow status`; steps past these keep no reason
_SUMMARY = re.compile(r"Of (\d+) slots on (\d+) machines,\n((?:\s+\d+ slots? .*\n?)+)")
_SUMMARY_LINE = re.compile(r"^\s+(\d+) slots? (.*)$", re.MULTILINE)
_CONDITION = re.compile(r"^\[\d+\]\s+(\d+)\s+(.+)$", re.MULTILINE)
_ATTRIBUTE = re.compile(r"^ {4}(\w+) = (.*)$", re.MULTILINE)
_LAST_FAILURE = re.compile(r"^Reason for last match failure: (.+)$", re.MULTILINE)

Runner = Callable[[list[str]], str | None]


def analyze_argv(
    cluster: int, run_id: str, schedd: str | None, pool: str | None, how: tuple[str, ...] = ("-better-analyze",)
) -> list[str]:
    # The run id in the constraint: a cluster number from an old run's event log may be another job now.
    constraint = f"ClusterId == {int(cluster)} && JobStatus == 1 && DagflowRunId == {classad2.quote(run_id)}"
    argv = ["condor_q", *how, "-constraint", constraint]
    if schedd:
        argv += ["-name", schedd]
    if pool:
        argv += ["-pool", pool]
    return argv


def _job_attributes(text: str) -> dict[str, str]:
    start = text.find("defines the following attributes:")
    if start < 0:
        return {}
    block = text[start:].split("\n\n", 2)
    return dict(_ATTRIBUTE.findall(block[1])) if len(block) > 1 else {}


def _gpu_detail(attributes: dict[str, str]) -> str | None:
    """RequireGPUs with the job's GPUsMin* values put in: `GlobalMemoryMb >= 81920`."""
    expression = attributes.get("RequireGPUs")
    if expression is None:
        return None
    for name in ("GPUsMinMemory", "GPUsMinCapability"):
        if name in attributes:
            expression = re.sub(rf"\b{name}\b", attributes[name].split(" (")[0], expression)
    return f"no GPU of a matching slot has {expression}"


def _unmet(text: str, attributes: dict[str, str]) -> list[str]:
    conditions = [condition.strip() for matched, condition in _CONDITION.findall(text) if matched == "0"]
    if any("RequireGPUs" in condition for condition in conditions):
        detail = _gpu_detail(attributes)
        if detail:
            conditions.append(detail)
    return conditions


def summarize(text: str, fits: bool | None = None, never: str | None = None) -> str | None:
    """One line from `condor_q -better-analyze` output for one job; None when it analysed no job. fits:
    whether a machine of the pool, whole, would run it (pool_fit.py; None: not known), and never: why none
    ever can."""
    summary = _SUMMARY.search(text)
    if summary is None:
        return None
    total = int(summary.group(1))
    counts = [(int(count), phrase.strip()) for count, phrase in _SUMMARY_LINE.findall(summary.group(3))]
    willing = sum(count for count, phrase in counts if "willing to run" in phrase)
    if total == 0:
        return "idle: the pool has no slots"
    if willing:
        return f"idle: {willing} of {total} slots match; waiting for the negotiator or a free slot"
    parts = [f"{count} of {total} slots {phrase.removesuffix(' your job')}" for count, phrase in counts if count]
    if fits:
        rejected = ", ".join(parts).replace("your job's", "the job's")
        return f"idle: busy: a machine of the pool can run it once its slots are free (now {rejected})"
    if fits is False and never:
        parts.insert(0, f"never matches: no machine in the pool can run it, {never}")
    unmet = [] if fits is False and never else _unmet(text, _job_attributes(text))
    if unmet:
        parts.append("unmet: " + "; ".join(unmet))
    failure = _LAST_FAILURE.search(text)
    if failure and not unmet and fits is None:
        parts.append(f"last match failure: {failure.group(1).strip()}")
    return "idle: " + ", ".join(parts).replace("your job's", "the job's")


def _no_slot_willing(text: str) -> bool:
    summary = _SUMMARY.search(text)
    return summary is not None and not any(
        int(count) and "willing to run" in phrase for count, phrase in _SUMMARY_LINE.findall(summary.group(3))
    )


def _idle_by_step(
    index: PlanIndex, records: Mapping[str, NodeRecord], jobs: dict[str, ev.NodeJob]
) -> dict[str, list[str]]:
    by_step: dict[str, list[str]] = {}
    position = index.position
    for name, job in jobs.items():
        if job.state != ev.QUEUED or name not in position:
            continue
        record = records.get(name)
        if record is not None and record.state == QUEUED and record.why is None:
            by_step.setdefault(index.step(position[name]), []).append(name)
    return by_step


def explain_idle(
    index: PlanIndex,
    records: Mapping[str, NodeRecord],
    jobs: dict[str, ev.NodeJob],
    record: CondorRecord,
    run: Runner = pool_fit.run_tool,
) -> None:
    """Set `why` on queued node records whose job is idle, from one analysis per step."""
    machines: list[classad2.ClassAd] | None = None
    for names in list(_idle_by_step(index, records, jobs).values())[:MAX_STEPS]:
        cluster = jobs[names[0]].cluster
        output = run(analyze_argv(cluster, index.run_id, record.schedd, record.pool))
        if not output:
            continue
        fits, never = None, None
        if _no_slot_willing(output):
            if machines is None:
                machines = pool_fit.whole_machines(pool_fit.parse_ads(run(pool_fit.machines_argv(record.pool)) or ""))
            ad = run(analyze_argv(cluster, index.run_id, record.schedd, record.pool, ("-long", "-limit", "1")))
            job = next(iter(pool_fit.parse_ads(ad or "")), None)
            if job is not None and machines:
                fits = pool_fit.ever_matches(job, machines)
                never = None if fits else pool_fit.never_why(job, machines)
        reason = summarize(output, fits, never)
        if reason is None:
            continue
        for name in names:
            records[name].why = reason
