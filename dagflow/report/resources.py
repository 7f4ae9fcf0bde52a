"""Per step: what the nodes asked for against what they used, with the waste called out in words.

"Used" is the worst case over the step's measured attempts (the peak of peaks): a request must cover
its hungriest node, so a request is wasteful only when even that node left most of it unused.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

from dagflow.plan.model import Plan
from dagflow.run.usage import NodeUsage

WASTE_SHARE = 0.5  # call a request out when at least this share of it went unused
MB_PER_GB = 1024


@dataclass(slots=True)
class StepUse:
    step: str
    nodes: int
    attempts: int  # measured attempts
    cpus: float
    memory_mb: float
    gpus: float
    gpu_memory_mb: float | None
    wall_s: list[float] = field(default_factory=list)
    cores_used: list[float] = field(default_factory=list)  # cpu_s / wall_s per attempt
    peak_memory_mb: list[float] = field(default_factory=list)
    gpu_memory_peak_mb: list[float] = field(default_factory=list)
    gpu_utilization_pct: list[float] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)  # oom, timeout, held: ... -> attempts
    memory_sampled: bool = False  # a peak is HTCondor's MemoryUsage, sampled: a short spike is missed

    @property
    def peak_memory(self) -> float | None:
        return max(self.peak_memory_mb, default=None)

    @property
    def peak_gpu_memory(self) -> float | None:
        return max(self.gpu_memory_peak_mb, default=None)

    @property
    def mean_cores(self) -> float | None:
        return statistics.fmean(self.cores_used) if self.cores_used else None

    @property
    def mean_gpu_utilization(self) -> float | None:
        return statistics.fmean(self.gpu_utilization_pct) if self.gpu_utilization_pct else None


def size_text(mb: float) -> str:
    if mb >= MB_PER_GB:
        return f"{mb / MB_PER_GB:.1f} GB"
    return f"{mb:.0f} MB" if mb >= 10 else f"{mb:.1f} MB"


def step_uses(plan: Plan, usage: Iterable[NodeUsage]) -> list[StepUse]:
    nodes_per_step: dict[str, int] = {}
    for node in plan.nodes.values():
        nodes_per_step[node.step] = nodes_per_step.get(node.step, 0) + 1
    uses: dict[str, StepUse] = {}
    in_order = [name for name in nodes_per_step if name in plan.steps]  # DAG order, then steps with no node
    for name in in_order + [name for name in plan.steps if name not in nodes_per_step]:
        step = plan.steps[name]
        asked = step.resources
        uses[name] = StepUse(name, nodes_per_step.get(name, 0), 0, asked.cpus, asked.memory_mb, asked.gpus,
                             asked.gpu_memory_mb)  # fmt: skip
    for record in usage:
        use = uses.get(record.step)
        if use is None:
            continue
        use.attempts += 1
        _requested_by_record(use, record)
        if record.wall_s is not None:
            use.wall_s.append(record.wall_s)
            if record.cpu_s is not None and record.wall_s > 0:
                use.cores_used.append(record.cpu_s / record.wall_s)
        if record.peak_memory_mb is not None:
            use.peak_memory_mb.append(record.peak_memory_mb)
            use.memory_sampled |= record.engine == "condor"
        if record.gpu_memory_peak_mb is not None:
            use.gpu_memory_peak_mb.append(record.gpu_memory_peak_mb)
        if record.gpu_utilization_pct is not None:
            use.gpu_utilization_pct.append(record.gpu_utilization_pct)
        if record.reason:
            use.reasons[record.reason] = use.reasons.get(record.reason, 0) + 1
    return list(uses.values())


def _requested_by_record(use: StepUse, record: NodeUsage) -> None:
    """What the attempt says it asked for wins over the plan's step (a retry may have asked for more)."""
    asked = record.requested
    if asked.get("memory_mb"):
        use.memory_mb = max(use.memory_mb, float(asked["memory_mb"]))
    if asked.get("cpus"):
        use.cpus = max(use.cpus, float(asked["cpus"]))
    if asked.get("gpu_memory_mb"):
        use.gpu_memory_mb = max(use.gpu_memory_mb or 0.0, float(asked["gpu_memory_mb"]))


def waste_lines(use: StepUse) -> list[str]:
    """The step's requests that mostly went unused, and requests its nodes outgrew, as sentences."""
    lines: list[str] = []
    peak = use.peak_memory
    if peak is not None and use.memory_mb > 0:
        unused = 1 - peak / use.memory_mb
        if unused >= WASTE_SHARE:
            measured = "HTCondor's sampled peak" if use.memory_sampled else "peak"
            lines.append(
                f"requested {size_text(use.memory_mb)}, {measured} {size_text(peak)} → {unused:.0%} of memory unused"
            )
        elif peak > use.memory_mb:
            lines.append(f"peak memory {size_text(peak)} is over the {size_text(use.memory_mb)} requested")
    cores = use.mean_cores
    if cores is not None and use.cpus >= 1:
        idle = 1 - cores / use.cpus
        if idle >= WASTE_SHARE and use.cpus > 1:
            lines.append(f"requested {use.cpus:g} CPUs, used {cores:.2f} on average → {idle:.0%} of CPU idle")
    gpu_peak = use.peak_gpu_memory
    if gpu_peak is not None and use.gpu_memory_mb:
        unused = 1 - gpu_peak / use.gpu_memory_mb
        if unused >= WASTE_SHARE:
            lines.append(
                f"requested {size_text(use.gpu_memory_mb)} of GPU memory, peak {size_text(gpu_peak)} → "
                f"{unused:.0%} of GPU memory unused"
            )
    utilisation = use.mean_gpu_utilization
    if utilisation is not None and use.gpus and utilisation < 100 * WASTE_SHARE:
        lines.append(f"GPU busy {utilisation:.0f}% of the time on average")
    for reason, count in sorted(use.reasons.items()):
        lines.append(f"{count} attempt{'s' if count != 1 else ''} ended: {reason}")
    return lines
