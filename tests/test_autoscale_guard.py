"""The scale-in guards across loops: every node leaving service (draining, drained, being terminated)
counts against the per-loop share, and a busy node is never terminated, whatever nodes advertise.

The loop, the decision and the pool model are the real ones; the cloud is an in-memory Auto Scaling
group (moto would make hundreds of hypothesis examples take minutes) that checks, at the moment of each
termination, that the instance's node holds no job."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import pytest
from autoscale_pool import InMemoryPool
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagflow.autoscale.cloud import AsgState, CloudError, Instance
from dagflow.autoscale.decide import out_of_service_cap
from dagflow.autoscale.demand import InMemorySchedd, ScheddDemand
from dagflow.autoscale.loop import Autoscaler
from dagflow.autoscale.policy import parse_policy
from dagflow.autoscale.pool import NodeState
from dagflow.autoscale.state import StateFile

FRACTION = 0.5
POLICY = f"""
settings: {{idle_grace_s: 60, max_scale_in_fraction: {FRACTION}}}
groups:
  - {{name: cpu, asg: cpu-asg, region: us-east-1, instance_type: c6i.4xlarge, min: 0, max: 40,
     machine: {{Cpus: 16, Memory: 31000, Disk: 1000000, GPUs: 0}}}}
"""
CAPACITY = (16.0, 31000.0, 1000000.0, 0.0)


class InMemoryGroup:
    """One Auto Scaling group; terminating an instance removes its startd from the pool."""

    def __init__(self, pool: InMemoryPool) -> None:
        self.pool = pool
        self.instances: dict[str, str] = {}  # instance id -> private IP
        self.throttled = False
        self.terminated: list[str] = []
        self.violations: list[str] = []

    def add(self, index: int) -> None:
        instance, address = f"i-{index:04d}", f"10.0.{index // 250}.{index % 250 + 1}"
        self.instances[instance] = address
        self.pool.add_node(f"node-{index}", CAPACITY, instance, address)

    def describe(self, region: str, names: Iterable[str]) -> dict[str, AsgState]:
        instances = tuple(Instance(i, "InService", ip) for i, ip in sorted(self.instances.items()))
        return {"cpu-asg": AsgState("cpu-asg", region, len(instances), 0, 40, instances)}

    def set_desired(self, region: str, name: str, desired: int) -> None:
        pass

    def recent_capacity_failure(self, region: str, name: str, since: dt.datetime) -> str | None:
        return None

    def terminate(self, region: str, instance_id: str) -> None:
        if self.throttled:
            raise CloudError(f"terminating {instance_id}: Throttling: Rate exceeded")
        address = self.instances.pop(instance_id)
        for name, machine in list(self.pool.machines.items()):
            if machine.address == address:
                if machine.claims:
                    self.violations.append(f"terminated {instance_id} under busy {name}")
                self.pool.remove_node(name)
        self.terminated.append(instance_id)


def out_of_service(pool: InMemoryPool) -> int:
    return sum(1 for name in pool.machines if pool.state(name) in (NodeState.DRAINING, NodeState.DRAINED))


step = st.tuples(
    st.sampled_from(["nothing", "start", "finish", "throttle", "lie"]),
    st.integers(min_value=0, max_value=1000),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(size=st.integers(min_value=1, max_value=12), busy=st.sets(st.integers(0, 11)), steps=st.lists(step, max_size=8))
@pytest.mark.slow
def test_loops_never_take_a_busy_node_nor_more_than_the_share(
    tmp_path: Path, size: int, busy: set[int], steps: list[tuple[str, int]]
) -> None:
    now = [1000.0]
    pool = InMemoryPool(clock=lambda: now[0])
    cloud = InMemoryGroup(pool)
    for index in range(size):
        cloud.add(index)
    for index in busy & set(range(size)):
        pool.start_job(f"node-{index}", f"{index}.0", (1.0, 1.0, 1.0, 0.0))
    state_path = tmp_path / f"state-{id(steps)}.json"
    state_path.unlink(missing_ok=True)
    scaler = Autoscaler(
        parse_policy(POLICY, "p.yaml"), ScheddDemand(InMemorySchedd()), pool, cloud,  # type: ignore[arg-type]
        StateFile(state_path), clock=lambda: now[0], emit=lambda text: None,
    )  # fmt: skip
    for action, pick in [("nothing", 0), *steps, ("nothing", 0), ("nothing", 0)]:
        now[0] += 120
        names = sorted(pool.machines)
        cloud.throttled = action == "throttle"
        if names and action in ("start", "finish", "lie"):
            name = names[pick % len(names)]
            machine = pool.machines[name]
            if action == "start" and not machine.draining:
                pool.start_job(name, f"job-{pick}-{now[0]}", (1.0, 1.0, 1.0, 0.0))
            elif action == "finish" and machine.claims:
                pool.finish_job(name, next(iter(machine.claims)))
            elif action == "lie":  # advertise another node's instance id
                machine.instance_id = pool.machines[names[(pick + 1) % len(names)]].instance_id
        pool_size = len(pool.machines)
        terminated_before = len(cloud.terminated)
        scaler.run_once()
        gone = len(cloud.terminated) - terminated_before
        assert not cloud.violations
        assert out_of_service(pool) + gone <= out_of_service_cap(pool_size, FRACTION), (action, pool_size)


def test_ten_idle_nodes_leave_five_at_a_time_even_after_a_throttled_loop(tmp_path: Path) -> None:
    """The red-team sequence: one loop terminated 5 and drained 5; after a throttled loop, 10 of 10 went."""
    now = [1000.0]
    pool = InMemoryPool(clock=lambda: now[0])
    cloud = InMemoryGroup(pool)
    for index in range(10):
        cloud.add(index)
    scaler = Autoscaler(
        parse_policy(POLICY, "p.yaml"), ScheddDemand(InMemorySchedd()), pool, cloud,  # type: ignore[arg-type]
        StateFile(tmp_path / "state.json"), clock=lambda: now[0], emit=lambda text: None,
    )  # fmt: skip
    history = []
    for throttled in (False, True, False, False):
        now[0] += 120
        cloud.throttled = throttled
        size = len(pool.machines)
        before = len(cloud.terminated)
        scaler.run_once()
        history.append((size, out_of_service(pool), len(cloud.terminated) - before))
    assert history[0] == (10, 5, 0)  # five drained, none terminated yet
    assert history[1] == (10, 5, 0)  # terminations throttled: nothing new drained meanwhile
    assert history[2] == (10, 0, 5)  # the five drained ones terminated, nothing else taken
    assert history[3] == (5, 2, 0)  # the next share of what is left
