"""An in-memory pool of partitionable-slot startds with HTCondor's drain rules: the autoscaler's pool
contract (dagflow/autoscale/pool.py) for the autoscale tests and benchmarks/autoscale.py; it records every
call."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from dagflow.autoscale.pool import Node, NodeState, PoolError, Vector


@dataclass
class _Machine:
    name: str
    instance_id: str | None
    capacity: Vector
    claims: dict[str, Vector] = field(default_factory=dict)
    draining: bool = False
    idle_since: float | None = None
    address: str | None = None


class InMemoryPool:
    """An in-memory pool of partitionable-slot startds, with HTCondor's drain rules:

    a draining startd accepts no new claims; a graceful drain lets running claims finish; a drained
    startd stays drained (and visible) until the drain is cancelled or the machine goes away; draining
    an already draining startd is refused.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.machines: dict[str, _Machine] = {}
        self.calls: list[tuple[str, ...]] = []

    def add_node(self, name: str, capacity: Vector, instance_id: str | None = None, address: str | None = None) -> None:
        """instance_id is what the startd advertises about itself; address the IP the collector sees."""
        self.machines[name] = _Machine(name, instance_id, capacity, idle_since=self.clock(), address=address)

    def remove_node(self, name: str) -> None:
        self.machines.pop(name, None)

    def start_job(self, name: str, job: str, request: Vector) -> None:
        machine = self._machine(name)
        if machine.draining:
            raise PoolError(f"{name} is draining and accepts no new jobs")
        free = self._free(machine)
        if any(need > have for need, have in zip(request, free, strict=True)):
            raise PoolError(f"{name} has no room for {job}")
        machine.claims[job] = request
        machine.idle_since = None

    def finish_job(self, name: str, job: str) -> None:
        machine = self._machine(name)
        del machine.claims[job]
        if not machine.claims:
            machine.idle_since = self.clock()

    def _machine(self, name: str) -> _Machine:
        if name not in self.machines:
            raise PoolError(f"no startd ad for machine {name}")
        return self.machines[name]

    @staticmethod
    def _free(machine: _Machine) -> Vector:
        used = [sum(claim[i] for claim in machine.claims.values()) for i in range(4)]
        return (
            machine.capacity[0] - used[0],
            machine.capacity[1] - used[1],
            machine.capacity[2] - used[2],
            machine.capacity[3] - used[3],
        )

    def state(self, name: str) -> NodeState:
        machine = self._machine(name)
        if machine.draining:
            return NodeState.DRAINING if machine.claims else NodeState.DRAINED
        return NodeState.BUSY if machine.claims else NodeState.IDLE

    def nodes(self) -> list[Node]:
        self.calls.append(("nodes",))
        result = []
        for machine in self.machines.values():
            state = self.state(machine.name)
            free = self._free(machine) if not machine.draining else (0.0, 0.0, 0.0, 0.0)
            idle_since = machine.idle_since if state is NodeState.IDLE else None
            result.append(Node(machine.name, machine.instance_id, state, free, idle_since, machine.address))
        return result

    def drain(self, name: str, reason: str) -> None:
        self.calls.append(("drain", name, reason))
        machine = self._machine(name)
        if machine.draining:
            raise PoolError(f"{name} is already draining")
        machine.draining = True

    def cancel_drain(self, name: str) -> None:
        self.calls.append(("cancel_drain", name))
        machine = self._machine(name)
        if not machine.draining:
            raise PoolError(f"{name} is not draining")
        machine.draining = False
        if not machine.claims:
            machine.idle_since = self.clock()
