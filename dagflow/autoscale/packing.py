"""Bin-packing identical jobs onto instances, by counts: bins with the same free space are one entry
with a multiplicity, so 10,000 jobs of a few shapes pack in a few hundred operations."""

from __future__ import annotations

from dataclasses import dataclass, field

from dagflow.autoscale.matching import Vector, per_instance


def _minus(free: Vector, request: Vector, times: int) -> Vector:
    return (
        free[0] - request[0] * times,
        free[1] - request[1] * times,
        free[2] - request[2] * times,
        free[3] - request[3] * times,
    )


@dataclass
class Bin:
    free: Vector
    count: int = 1  # how many instances have exactly this free space
    node: str | None = None  # a registered node, or None for an instance not in the pool yet
    used: bool = False


@dataclass
class Bins:
    bins: list[Bin] = field(default_factory=list)

    def add(self, free: Vector, count: int = 1, node: str | None = None) -> None:
        if count > 0:
            self.bins.append(Bin(free, count, node))

    def fill(self, request: Vector, jobs: int) -> int:
        """Place up to `jobs` jobs into free space, first fit; returns how many are left over."""
        added: list[Bin] = []
        for current in self.bins:
            if jobs == 0:
                break
            each = per_instance(request, current.free)
            if each == 0:
                continue
            if each * current.count <= jobs:
                jobs -= each * current.count
                current.free = _minus(current.free, request, each)
                current.used = True
                continue
            full, rest = divmod(jobs, each)
            if full:
                added.append(Bin(_minus(current.free, request, each), full, current.node, True))
            if rest:
                added.append(Bin(_minus(current.free, request, rest), 1, current.node, True))
            current.count -= full + (1 if rest else 0)
            jobs = 0
        self.bins.extend(added)
        return jobs

    def open(self, capacity: Vector, request: Vector, jobs: int, limit: int) -> tuple[int, int]:
        """Open up to `limit` new instances of `capacity` for the jobs; returns (opened, jobs left)."""
        each = per_instance(request, capacity)
        if each == 0 or limit <= 0:
            return 0, jobs
        full = min(jobs // each, limit)
        opened = full
        if full:
            self.bins.append(Bin(_minus(capacity, request, each), full, None, True))
            jobs -= full * each
        if jobs and opened < limit and jobs < each:
            self.bins.append(Bin(_minus(capacity, request, jobs), 1, None, True))
            opened += 1
            jobs = 0
        return opened, jobs

    def used_nodes(self) -> set[str]:
        return {b.node for b in self.bins if b.used and b.node is not None}
