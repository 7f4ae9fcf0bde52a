"""Memory growth on HTCondor: a job over its memory is held, released with a bigger request, up to a cap.

For a step with `memory_max` (plan Resources.memory_max_mb), HTCondor's documented idiom, as submit lines:

    request_memory        = min({CAP, ifThenElse(MemoryUsage =?= undefined, BASE, max({BASE, MemoryUsage * GROWTH}))})
    periodic_hold         = running, and MemoryUsage > MemoryProvisioned (the slot's memory)
    periodic_hold_reason  = "dagflow: memory usage N MB over the M MB provisioned (memory_max CAP MB)"
    periodic_hold_subcode = MEMORY_HOLD_SUBCODE
    periodic_release      = held by that policy (HoldReasonCode 3, our subcode) and the slot was below CAP
    periodic_remove       = held by that policy at CAP (the node fails with that hold reason; DAGMan's RETRY
                            may then start it afresh at BASE)

The growth lives in the job, not in DAGMan's RETRY: a retry submits a new job, whose NumJobStarts and
MemoryUsage start over, while a released job keeps its MemoryUsage, so its request_memory, evaluated
again at the next match, is the usage that got it held times GROWTH. The hold compares against
MemoryProvisioned, not RequestMemory, because RequestMemory follows MemoryUsage while the job runs.
Personal (non-root) pools have no cgroup limit, so nothing else stops a job using more than its slot:
this policy is what enforces it there.
"""

from __future__ import annotations

from dagflow.engines.condor import escape
from dagflow.plan.model import StepInfo

MEMORY_HOLD_SUBCODE = 1717  # HoldReasonSubCode of dagflow's memory hold (HoldReasonCode 3: job policy)
JOB_POLICY_HOLD = 3
_MERGED = ("periodic_remove", "periodic_hold", "periodic_release")  # a submit file keeps one of each: OR them


def _number(value: float, what: str) -> str:
    return escape.classad_value(int(value) if float(value).is_integer() else float(value), what)


def memory_growth_lines(step: StepInfo) -> list[str]:
    """The submit lines of the memory-growth policy; none for a step without memory_max."""
    res = step.resources
    if res.memory_max_mb is None:
        return []
    what = f"step {step.name} resources"
    base = _number(res.memory_mb, f"{what} memory")
    cap = _number(max(res.memory_max_mb, res.memory_mb), f"{what} memory_max")
    growth = _number(res.memory_growth, f"{what} memory_growth")
    provisioned = "(MemoryProvisioned ?: RequestMemory)"
    ours = (
        f"(JobStatus == 5) && (HoldReasonCode =?= {JOB_POLICY_HOLD}) "
        f"&& (HoldReasonSubCode =?= {MEMORY_HOLD_SUBCODE})"
    )
    return [
        f"request_memory = min({{{cap}, ifThenElse(MemoryUsage =?= undefined, {base}, "
        f"max({{{base}, MemoryUsage * {growth}}}))}})",
        f"periodic_hold = (JobStatus == 2) && (MemoryUsage =!= undefined) && (MemoryUsage > {provisioned})",
        f'periodic_hold_reason = strcat("dagflow: memory usage ", MemoryUsage, " MB over the ", {provisioned}, '
        f'" MB provisioned (memory_max {cap} MB)")',
        f"periodic_hold_subcode = {MEMORY_HOLD_SUBCODE}",
        f"periodic_release = {ours} && ({provisioned} < {cap})",
        f"periodic_remove = {ours} && ({provisioned} >= {cap})",
    ]


def with_memory_growth(step: StepInfo, lines: list[str]) -> list[str]:
    """lines (a step's policy block) plus the memory-growth lines, one OR-ed line per periodic_* command."""
    extra = memory_growth_lines(step)
    if not extra:
        return lines
    merged: dict[str, list[str]] = {}
    out: list[str] = []
    for line in [*lines, *extra]:
        command, _, value = line.partition("=")
        command = command.strip()
        if command.lower() in _MERGED:
            if command.lower() not in merged:
                merged[command.lower()] = []
                out.append(command.lower())  # a placeholder, filled below
            merged[command.lower()].append(value.strip())
        else:
            out.append(line)
    return [
        f"{line} = " + " || ".join(f"({value})" for value in merged[line]) if line in merged else line for line in out
    ]
