"""Memory limits of local nodes, enforced for steps that allow memory growth (`memory_max`).

The local engine does not otherwise limit memory (it only books `memory` against the machine's total
when placing nodes). For a step with `memory_max`, the runner samples the resident set size of the
node's whole process group every MEMORY_CHECK_S and kills the group (SIGKILL) once it is over the
node's current limit, as HTCondor's periodic policy does with MemoryUsage; a SIGKILL nobody sent (the
kernel's OOM killer) counts the same. The node then runs again with its limit x memory_growth, up to
memory_max; at the cap, the next overrun fails it. The sum counts pages shared between the group's
processes once per process (as HTCondor's ResidentSetSize of a job does), so forked workers err high.
A node adopted by a resumed runner is not watched, and starts its next attempt at the step's memory.
RLIMIT_AS / RLIMIT_DATA are not used: they limit address space, which Python, CUDA and numpy programs
map far beyond what they touch.
"""

from __future__ import annotations

import math
import os
from dataclasses import replace

from dagflow.plan import Resources, StepInfo

MEMORY_CHECK_S = 0.25
_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def enforced(step: StepInfo) -> bool:
    return step.resources.memory_max_mb is not None


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in process group pgid, in MB (0 when none is left)."""
    total_pages = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rpartition(b")")[2].split()
            if int(fields[2]) != pgid:  # after the command name: state, ppid, pgrp, ...
                continue
            with open(f"/proc/{entry}/statm", "rb") as statm:
                total_pages += int(statm.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # it exited meanwhile
    return total_pages * _PAGE_MB


class MemoryGrowth:
    """Each node's current memory limit: the step's memory, grown after each overrun up to the cap."""

    def __init__(self, machine_memory_mb: int) -> None:
        self.machine_memory_mb = machine_memory_mb  # a grown node must still fit this machine
        self._limits: dict[str, int] = {}
        self.peaks: dict[str, float] = {}  # the RSS a node was killed at

    def limit(self, name: str, step: StepInfo) -> int:
        return self._limits.get(name, step.resources.memory_mb)

    def resources(self, name: str, step: StepInfo) -> Resources:
        """What the node books in the pool: the step's resources with its current memory limit."""
        limit = self._limits.get(name)
        return step.resources if limit is None else replace(step.resources, memory_mb=limit)

    def grow(self, name: str, step: StepInfo) -> int | None:
        """Raise the node's limit for its next attempt; None when it is at the cap already."""
        cap = step.resources.memory_max_mb
        cap = None if cap is None else min(cap, self.machine_memory_mb)
        current = self.limit(name, step)
        if cap is None or current >= cap:
            return None
        grown = min(cap, math.ceil(current * step.resources.memory_growth))
        self._limits[name] = grown
        return grown
