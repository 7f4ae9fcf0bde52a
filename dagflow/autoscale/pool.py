"""The pool side: which execute nodes exist, whether they are busy, and draining them.

`CondorPool` reads startd ads from the collector and drains through htcondor2 (condor_drain's API);
`AdsFilePool` reads saved ads for --dry-run planning.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import classad2

Vector = tuple[float, float, float, float]  # cpus, memory MiB, disk KiB, gpus


class NodeState(enum.Enum):
    """A registered node's state, as the autoscaler sees it (instances without a node are BOOTING)."""

    BUSY = "busy"  # at least one claimed slot
    IDLE = "idle"  # no claims, accepting jobs
    DRAINING = "draining"  # no new jobs; running ones finishing
    DRAINED = "drained"  # no jobs and accepting none: safe to terminate


@dataclass(frozen=True, slots=True)
class Node:
    name: str  # the Machine name (what condor_drain takes)
    # The EC2 instance: what the node advertises (EC2InstanceId) until bind_instances() replaces it with
    # the instance the cloud reports at the node's address; the autoscaler acts on the bound one only.
    instance_id: str | None
    state: NodeState
    free: Vector  # unclaimed resources (partitionable slot's remainder)
    idle_since: float | None  # when the node last became idle (epoch seconds), None if not idle
    address: str | None = None  # the IP the collector sees the startd at (MyAddress)


_SINFUL_IP = re.compile(r"^<(\d{1,3}(?:\.\d{1,3}){3}):")


def sinful_ip(my_address: object) -> str | None:
    """The IPv4 address of a startd's sinful string, e.g. <10.0.3.7:9618?addrs=...> -> 10.0.3.7."""
    match = _SINFUL_IP.match(str(my_address)) if isinstance(my_address, str) else None
    return match.group(1) if match else None


def bind_instances(nodes: Iterable[Node], ip_to_instance: dict[str, str]) -> list[Node]:
    """Each node with the instance the cloud reports at its address, never what it says about itself;
    None when no instance or more than one node claims an address (nothing is done to such a node)."""
    nodes = list(nodes)
    counts: dict[str, int] = {}
    for node in nodes:
        if node.address:
            counts[node.address] = counts.get(node.address, 0) + 1
    return [
        dataclasses.replace(
            node,
            instance_id=ip_to_instance.get(node.address) if node.address and counts[node.address] == 1 else None,
        )
        for node in nodes
    ]


class PoolControl(Protocol):
    def nodes(self) -> list[Node]: ...

    def drain(self, name: str, reason: str) -> None: ...

    def cancel_drain(self, name: str) -> None: ...


class PoolError(Exception):
    """A pool operation failed (the node is unknown, already draining, unreachable...)."""


STARTD_PROJECTION = [
    "Name",
    "Machine",
    "SlotType",
    "State",
    "Activity",
    "Cpus",
    "Memory",
    "Disk",
    "GPUs",
    "EC2InstanceId",
    "MyAddress",
    "EnteredCurrentState",
    "Draining",
]


def nodes_from_slot_ads(ads: Iterable[classad2.ClassAd]) -> list[Node]:
    """Fold startd slot ads (one per slot) into one Node per machine."""
    by_machine: dict[str, list[classad2.ClassAd]] = {}
    for ad in ads:
        by_machine.setdefault(str(ad.get("Machine", ad.get("Name", "?"))), []).append(ad)
    nodes = []
    for machine, slots in sorted(by_machine.items()):
        states = [str(slot.get("State", "")) for slot in slots]
        activities = [str(slot.get("Activity", "")) for slot in slots]
        claimed = any(state == "Claimed" for state in states)
        draining = any(slot.get("Draining", False) is True for slot in slots) or "Drained" in states
        if draining:
            retiring = claimed or any(a in ("Retiring", "Busy", "Vacating", "Killing") for a in activities)
            state = NodeState.DRAINING if retiring else NodeState.DRAINED
        else:
            state = NodeState.BUSY if claimed else NodeState.IDLE
        free = [0.0, 0.0, 0.0, 0.0]
        for slot in slots:
            if slot.get("State") == "Unclaimed":
                for index, name in enumerate(("Cpus", "Memory", "Disk", "GPUs")):
                    value = slot.get(name, 0)
                    free[index] += float(value) if isinstance(value, int | float) else 0.0
        entered = [slot.get("EnteredCurrentState") for slot in slots]
        instance = next((str(slot["EC2InstanceId"]) for slot in slots if "EC2InstanceId" in slot), None)
        address = next((ip for slot in slots if (ip := sinful_ip(slot.get("MyAddress"))) is not None), None)
        nodes.append(
            Node(
                name=machine,
                instance_id=instance,
                state=state,
                free=(free[0], free[1], free[2], free[3]),
                idle_since=max((float(t) for t in entered if isinstance(t, int | float)), default=None)
                if state is NodeState.IDLE
                else None,
                address=address,
            )
        )
    return nodes


class CondorPool:
    """The real pool: the collector's startd ads; drains through the startd's drain command."""

    def __init__(self, pool: str | None = None) -> None:
        import htcondor2

        self._htcondor = htcondor2
        self.collector = htcondor2.Collector(pool) if pool else htcondor2.Collector()

    def nodes(self) -> list[Node]:
        ads = self.collector.query(self._htcondor.AdType.Startd, projection=STARTD_PROJECTION)
        return nodes_from_slot_ads(ads)

    def _startd(self, name: str):  # -> htcondor2.Startd
        ads = self.collector.query(self._htcondor.AdType.Startd, constraint=f"Machine == {classad2.quote(name)}")
        if not ads:
            raise PoolError(f"no startd ad for machine {name}")
        return self._htcondor.Startd(ads[0])

    def drain(self, name: str, reason: str) -> None:
        try:
            self._startd(name).drainJobs(self._htcondor.DrainType.Graceful, reason=reason)
        except Exception as error:  # htcondor2 raises HTCondorException subclasses
            raise PoolError(f"draining {name}: {error}") from error

    def cancel_drain(self, name: str) -> None:
        try:
            self._startd(name).cancelDrainJobs()
        except Exception as error:
            raise PoolError(f"cancelling the drain of {name}: {error}") from error


class AdsFilePool:
    """A read-only pool from saved startd ads (`condor_status -l` output): for --dry-run planning."""

    def __init__(self, path: str) -> None:
        from pathlib import Path

        self._nodes = nodes_from_slot_ads(classad2.parseAds(Path(path).read_text(encoding="utf-8")))

    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def drain(self, name: str, reason: str) -> None:
        raise PoolError("the pool was read from a file; it cannot be drained (use --dry-run)")

    def cancel_drain(self, name: str) -> None:
        raise PoolError("the pool was read from a file; it cannot be changed (use --dry-run)")
