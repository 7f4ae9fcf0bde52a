"""One loop's decision, as a pure function of what was observed: no I/O, so it is testable and timed.

Scale-out: jobs first fill free space on nodes already there or booting (any matching group), then
drains of our own nodes are cancelled, then new instances open in overflow order (priority, region),
skipping groups in a capacity timeout. Scale-in: only idle nodes past the grace period that no job
will use, longest idle first, within the per-loop guards; drained first, terminated a later loop.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from dagflow.autoscale.cloud import AsgState
from dagflow.autoscale.demand import Signature
from dagflow.autoscale.matching import Matcher
from dagflow.autoscale.packing import Bins
from dagflow.autoscale.policy import Group, Policy
from dagflow.autoscale.pool import Node, NodeState
from dagflow.autoscale.state import State


@dataclass(frozen=True, slots=True)
class SetDesired:
    group: str
    region: str
    asg: str
    current: int
    target: int
    reason: str

    def describe(self) -> str:
        return f"set {self.asg} ({self.region}) desired capacity {self.current} -> {self.target}: {self.reason}"


@dataclass(frozen=True, slots=True)
class Drain:
    node: str
    instance_id: str
    group: str
    reason: str

    def describe(self) -> str:
        return f"drain {self.node} ({self.instance_id}, {self.group}): {self.reason}"


@dataclass(frozen=True, slots=True)
class CancelDrain:
    node: str
    group: str

    def describe(self) -> str:
        return f"cancel the drain of {self.node} ({self.group}): jobs need it again"


@dataclass(frozen=True, slots=True)
class Terminate:
    node: str
    instance_id: str
    group: str
    region: str
    asg: str

    def describe(self) -> str:
        return f"terminate {self.instance_id} ({self.node}) in {self.asg} with decrement: drained"


Action = SetDesired | Drain | CancelDrain | Terminate


@dataclass
class GroupPlan:
    group: Group
    desired: int = 0
    live: int = 0
    busy: int = 0
    idle: int = 0
    removing: int = 0
    booting: int = 0
    jobs: int = 0  # idle jobs this group will run (on free space, reclaimed or new instances)
    new: int = 0
    target: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Unplaced:
    count: int
    examples: tuple[str, ...]
    requirements: str
    request: str
    reason: str


@dataclass
class Decision:
    plans: dict[str, GroupPlan]
    actions: list[Action]
    unmatched: list[Unplaced]  # match no group at all: would sit idle forever
    unsatisfied: list[Unplaced]  # match groups, but they are at max or out of capacity
    forget: list[str]  # removals that are over (instance gone) or abandoned (node busy again)
    idle_since: dict[str, float]
    pool_size: int
    scale_in_limit: int
    total_jobs: int


def out_of_service_cap(pool_size: int, fraction: float) -> int:
    """How many of the pool's nodes may be out of service (draining, drained or being terminated) at
    once: a fraction of the pool (at least one), never more than half of it. A lone node may go: that
    is scaling to zero."""
    if pool_size <= 0:
        return 0
    if pool_size == 1:
        return 1
    return min(max(1, math.floor(fraction * pool_size)), pool_size // 2)


def scale_in_limit(pool_size: int, fraction: float, in_flight: int) -> int:
    """Nodes this loop may start removing: what the cap leaves after every removal already in flight."""
    return max(0, out_of_service_cap(pool_size, fraction) - in_flight)


def _request_text(signature: Signature) -> str:
    r = signature.request
    return f"cpus={r.cpus:g} memory={r.memory:g}MiB gpus={r.gpus:g}"


def decide(
    policy: Policy,
    asgs: dict[str, AsgState],
    nodes: Sequence[Node],
    signatures: Sequence[Signature],
    state: State,
    now: float,
    matcher: Matcher | None = None,
) -> Decision:
    settings = policy.settings
    matcher = matcher or Matcher(policy.groups)
    by_instance = {node.instance_id: node for node in nodes if node.instance_id}
    plans: dict[str, GroupPlan] = {}
    free: dict[str, Bins] = {}
    reclaimable: dict[str, list[Node]] = {}
    headroom: dict[str, int] = {}
    timed_out: set[str] = set()
    actions: list[Action] = []
    forget: list[str] = []
    pool_nodes: dict[str, tuple[Node, Group]] = {}
    live_instances: set[str] = set()

    for group in policy.groups:
        plan = plans[group.name] = GroupPlan(group)
        bins = free[group.name] = Bins()
        reclaimable[group.name] = []
        asg = asgs.get(group.name)
        if asg is None:
            plan.notes.append("group not found in AWS")
            headroom[group.name] = 0
            continue
        live = asg.live_instances()
        live_instances.update(i.instance_id for i in live)
        plan.desired, plan.live = asg.desired, len(live)
        until = state.capacity_timeouts.get(group.name, 0.0)
        if until > now:
            timed_out.add(group.name)
            plan.notes.append(
                f"capacity timeout for {int(until - now)}s ({state.capacity_reasons.get(group.name, '')})"
            )
        unlaunched = max(0, asg.desired - len(live))
        for instance in live:
            node = by_instance.get(instance.instance_id)
            if node is None:
                plan.booting += 1
                continue
            pool_nodes[node.name] = (node, group)
            if node.name in state.removing:
                plan.removing += 1
                if node.state in (NodeState.DRAINING, NodeState.DRAINED):
                    reclaimable[group.name].append(node)
                continue
            if node.state is NodeState.BUSY:
                plan.busy += 1
            elif node.state is NodeState.IDLE:
                plan.idle += 1
            if node.state in (NodeState.BUSY, NodeState.IDLE):
                bins.add(node.free, 1, node.name)
        bins.add(group.capacity, plan.booting, None)
        if group.name in timed_out:
            if unlaunched:  # stop the group retrying; its demand goes elsewhere
                target = max(len(live), asg.min_size)
                if target < asg.desired:
                    actions.append(
                        SetDesired(group.name, group.region, group.asg, asg.desired, target, "capacity timeout")
                    )
                    plan.desired = target
        else:
            bins.add(group.capacity, unlaunched, None)
        size = max(plan.desired, len(live))
        headroom[group.name] = max(0, min(group.max_size, asg.max_size) - size)

    # Scale-out, pass 1: free space that exists or is already on its way, in any matching group.
    ordered = sorted(signatures, key=lambda s: tuple(-x for x in s.request.vector()))
    left: dict[int, int] = {}
    candidates: dict[int, list[Group]] = {}
    unmatched: list[Unplaced] = []
    for index, signature in enumerate(ordered):
        groups = matcher.candidates(signature)
        if not groups:
            unmatched.append(
                Unplaced(
                    signature.count,
                    tuple(signature.examples),
                    signature.requirements,
                    _request_text(signature),
                    matcher.explain(signature),
                )
            )
            continue
        candidates[index] = groups
        jobs = signature.count
        for group in groups:
            before = jobs
            jobs = free[group.name].fill(signature.request.vector(), jobs)
            plans[group.name].jobs += before - jobs
            if jobs == 0:
                break
        left[index] = jobs

    # Pass 2: reclaim our draining nodes, then open new instances, in overflow order.
    reclaimed: set[str] = set()
    unsatisfied: list[Unplaced] = []
    for index, jobs in left.items():
        signature = ordered[index]
        for group in candidates[index]:
            if jobs == 0:
                break
            if group.name in timed_out:
                continue
            plan = plans[group.name]
            while jobs and reclaimable[group.name]:
                node = reclaimable[group.name].pop(0)
                actions.append(CancelDrain(node.name, group.name))
                reclaimed.add(node.name)
                forget.append(node.name)
                free[group.name].add(group.capacity, 1, node.name)
                before = jobs
                jobs = free[group.name].fill(signature.request.vector(), jobs)
                plan.jobs += before - jobs
            before = jobs
            jobs = free[group.name].fill(signature.request.vector(), jobs)  # earlier signatures' new bins
            opened, jobs = free[group.name].open(group.capacity, signature.request.vector(), jobs, headroom[group.name])
            headroom[group.name] -= opened
            plan.new += opened
            plan.jobs += before - jobs
        if jobs:
            blocked = [g.name for g in candidates[index] if g.name in timed_out]
            reason = "every matching group is at its max"
            if blocked:
                reason += f" or in a capacity timeout ({', '.join(blocked)})"
            unsatisfied.append(
                Unplaced(jobs, tuple(signature.examples), signature.requirements, _request_text(signature), reason)
            )

    for group in policy.groups:
        plan = plans[group.name]
        size = max(plan.desired, plan.live)
        plan.target = size + plan.new
        if plan.new:
            actions.append(
                SetDesired(group.name, group.region, group.asg, plan.desired, plan.target, f"{plan.jobs} idle jobs")
            )
        elif group.name not in timed_out and plan.live < group.min_size <= plan.desired:
            plan.notes.append(f"below min ({group.min_size}): the group is launching")

    # Removals in flight: terminate what is drained, re-send lost drains, drop what is over. Every node
    # still in the pool and leaving it counts against the scale-in cap, whatever its step.
    in_flight = 0
    for name, removal in state.removing.items():
        if name in reclaimed:
            continue
        entry = pool_nodes.get(name)
        if entry is None:
            if removal.instance_id not in live_instances:
                forget.append(name)  # terminated (maybe by us before a restart): done
            else:
                in_flight += 1
                plans[removal.group].notes.append(f"{name}: removing, but its node ad is missing")
            continue
        node, group = entry
        if node.instance_id != removal.instance_id:  # the cloud now places this node on another instance
            in_flight += 1
            moved = f"{name}: removing {removal.instance_id}, but the node is now on {node.instance_id}"
            plans[group.name].notes.append(moved)
        elif node.state is NodeState.DRAINED:
            in_flight += 1
            actions.append(Terminate(name, removal.instance_id, group.name, group.region, group.asg))
        elif node.state is NodeState.DRAINING:
            in_flight += 1
        elif node.state is NodeState.IDLE:
            in_flight += 1
            actions.append(Drain(name, removal.instance_id, group.name, "resending: the node is not draining"))
        else:  # busy again: someone cancelled the drain and it took jobs; it stays
            forget.append(name)

    # Scale-in: idle past the grace period, unused by this loop's demand, within the guards.
    used = set().union(*(bins.used_nodes() for bins in free.values())) if free else set()
    idle_since: dict[str, float] = {}
    idle: list[tuple[int, float, Node, Group]] = []
    for name, (node, group) in pool_nodes.items():
        if node.state is not NodeState.IDLE or name in state.removing:
            continue
        since = node.idle_since if node.idle_since is not None else state.idle_since.get(name, now)
        idle_since[name] = since
        if name not in used and now - since >= settings.idle_grace_s and plans[group.name].new == 0:
            idle.append((-group.priority, since, node, group))
    pool_size = len(pool_nodes)
    limit = scale_in_limit(pool_size, settings.max_scale_in_fraction, in_flight)
    allowance = {
        g.name: plans[g.name].live - plans[g.name].removing - max(g.min_size, asgs[g.name].min_size)
        for g in policy.groups
        if g.name in asgs
    }
    for _, since, node, group in sorted(idle, key=lambda item: (item[0], item[1])):
        if limit <= 0:
            break
        if allowance.get(group.name, 0) <= 0:
            continue
        allowance[group.name] -= 1
        limit -= 1
        assert node.instance_id is not None
        actions.append(Drain(node.name, node.instance_id, group.name, f"idle for {int(now - since)}s"))
    return Decision(
        plans=plans,
        actions=actions,
        unmatched=unmatched,
        unsatisfied=unsatisfied,
        forget=forget,
        idle_since=idle_since,
        pool_size=pool_size,
        scale_in_limit=scale_in_limit(pool_size, settings.max_scale_in_fraction, in_flight),
        total_jobs=sum(s.count for s in signatures),
    )
