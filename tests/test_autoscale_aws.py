"""The autoscaler against a real AWS API server (moto_server on loopback, boto3 through endpoint_url),
with the schedd side fed classad2 job ads through the same query interface, and the pool an
in-memory model of startds. `World` plays the parts no test can run: node agents registering new
instances, and the negotiator starting idle jobs on nodes that match."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import classad2
import pytest
from autoscale_pool import InMemoryPool
from aws_fixtures import create_asg
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from dagflow.autoscale.cloud import AutoScaling
from dagflow.autoscale.demand import InMemorySchedd, ScheddDemand
from dagflow.autoscale.loop import Autoscaler, LoopResult
from dagflow.autoscale.matching import htcondor_match
from dagflow.autoscale.policy import Policy, parse_policy
from dagflow.autoscale.pool import NodeState
from dagflow.autoscale.state import StateFile
from dagflow.cli import app
from dagflow.engines.condor.submit_writer import requirements
from dagflow.plan.model import Resources, StepInfo

POLICY = """
settings:
  idle_grace_s: 300
  max_scale_in_fraction: 0.5
  capacity_timeout_s: 3600
  region_order: [us-east-1, us-west-2]
defaults:
  machine: {OpSys: LINUX, Arch: X86_64}
groups:
  - name: t4-east
    asg: g4dn-east
    region: us-east-1
    instance_type: g4dn.xlarge
    spot: true
    max: 3
    priority: 1
    machine: {Cpus: 4, Memory: 15000, Disk: 100000000, GPUs: 1,
              GPUs_GlobalMemoryMb: 15360, CUDACapability: 7.5}
  - name: a100-east
    asg: p4de-east
    region: us-east-1
    instance_type: p4de.24xlarge
    spot: true
    max: 2
    priority: 2
    machine: &a100 {Cpus: 96, Memory: 1140000, Disk: 900000000, GPUs: 8,
                    GPUs_GlobalMemoryMb: 81920, CUDACapability: 8.0}
  - name: a100-west
    asg: p4de-west
    region: us-west-2
    instance_type: p4de.24xlarge
    spot: true
    max: 2
    priority: 2
    machine: *a100
"""


def condor_submit_requirements(step: StepInfo, ad: classad2.ClassAd) -> classad2.ExprTree:
    """The Requirements HTCondor 25's condor_submit makes from a compiled step (as `condor_submit -dry-run`
    shows): the compiler's clauses, plus a count of the machine's GPUs that meet the per-GPU limits the
    compiler wrote as gpus_minimum_memory / gpus_minimum_capability (RequireGPUs, set into `ad`)."""
    res = step.resources
    clauses = [requirements(step)]
    limits = []
    if res.gpus and res.gpu_memory_mb is not None:
        ad["GPUsMinMemory"] = int(res.gpu_memory_mb)
        limits.append("GlobalMemoryMb >= GPUsMinMemory")
    if res.gpus and res.cuda_capability is not None:
        ad["GPUsMinCapability"] = float(res.cuda_capability)
        limits.append("Capability >= GPUsMinCapability")
    if limits:
        ad["RequireGPUs"] = classad2.ExprTree(" && ".join(limits))
        clauses.append("(countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs)")
    elif res.gpus:
        clauses.append("(TARGET.GPUs >= RequestGPUs)")
    return classad2.ExprTree(" && ".join(f"({clause})" for clause in clauses))


def gpu_job(cluster: int, proc: int, gpu_memory_mb: int | None = 16384, capability: float = 7.5) -> classad2.ClassAd:
    """A job ad as condor_submit makes it from dagflow's compiled train step."""
    resources = Resources(
        cpus=4, memory_mb=8192, disk_mb=2048, gpus=1, gpu_memory_mb=gpu_memory_mb, cuda_capability=capability
    )
    step = StepInfo(
        name="train", kind="train", axes=("region",), resources=resources,
        retries=0, retry_unless_exit=(), timeout_s=None, priority=0, metrics=None,
    )  # fmt: skip
    ad = classad2.ClassAd()
    for name, value in {
        "ClusterId": cluster,
        "ProcId": proc,
        "JobStatus": 1,
        "RequestCpus": 4,
        "RequestMemory": 8192,
        "RequestDisk": 2048 * 1024,
        "RequestGpus": 1,
        "DagflowStep": "train",
        "DagflowRegion": "us",
        "Owner": "alice",
    }.items():
        ad[name] = value
    ad["Requirements"] = condor_submit_requirements(step, ad)
    return ad


class World:
    def __init__(self, endpoint: str, tmp_path: Path, policy: Policy | None = None) -> None:
        self.now = 1_000_000.0
        self.policy = policy or parse_policy(POLICY, "test-policy.yaml")
        for group in self.policy.groups:
            create_asg(endpoint, group.region, group.asg, group.instance_type, group.max_size)
        self.endpoint = endpoint
        self.pool = InMemoryPool(clock=lambda: self.now)
        self.schedd = InMemorySchedd()
        self.state_path = tmp_path / "state.json"
        self.reports: list[str] = []
        self.scaler = self.new_autoscaler()

    def new_autoscaler(self, dry_run: bool = False) -> Autoscaler:
        """A fresh process: nothing carried over but the state file."""
        self.scaler = Autoscaler(
            self.policy,
            ScheddDemand(self.schedd),
            self.pool,
            AutoScaling(self.endpoint),
            StateFile(self.state_path),
            dry_run=dry_run,
            clock=lambda: self.now,
            emit=self.reports.append,
        )
        return self.scaler

    def asg(self, group: str) -> dict:
        spec = self.policy.group(group)
        client = boto3.client("autoscaling", region_name=spec.region, endpoint_url=self.endpoint)
        return client.describe_auto_scaling_groups(AutoScalingGroupNames=[spec.asg])["AutoScalingGroups"][0]

    def desired(self) -> dict[str, int]:
        return {g.name: self.asg(g.name)["DesiredCapacity"] for g in self.policy.groups}

    def private_ip(self, group: str, instance_id: str) -> str:
        ec2 = boto3.client("ec2", region_name=self.policy.group(group).region, endpoint_url=self.endpoint)
        reservations = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
        return reservations[0]["Instances"][0]["PrivateIpAddress"]

    def boot(self) -> None:
        """Node agents on new instances register them (the collector sees each at its instance's private
        IP); terminated instances' startds vanish."""
        live = set()
        for group in self.policy.groups:
            for instance in self.asg(group.name)["Instances"]:
                live.add(instance["InstanceId"])
                name = f"node-{instance['InstanceId']}"
                if name not in self.pool.machines:
                    address = self.private_ip(group.name, instance["InstanceId"])
                    self.pool.add_node(name, group.capacity, instance["InstanceId"], address)
        for name, machine in list(self.pool.machines.items()):
            if machine.instance_id not in live:
                self.pool.remove_node(name)

    def negotiate(self) -> int:
        """Start idle jobs on nodes whose machine ad matches (the negotiator's part)."""
        started = 0
        for ad in self.schedd.ads:
            if ad["JobStatus"] != 1:
                continue
            for name, machine in self.pool.machines.items():
                group = next(g for g in self.policy.groups if g.capacity == machine.capacity)
                machine_ad = group.machine_ad()
                request = (4.0, 8192.0, 2048.0 * 1024, 1.0)
                if self.pool.state(name) in (NodeState.IDLE, NodeState.BUSY) and htcondor_match(ad, machine_ad):
                    try:
                        self.pool.start_job(name, f"{ad['ClusterId']}.{ad['ProcId']}", request)
                    except Exception:
                        continue
                    ad["JobStatus"] = 2
                    started += 1
                    break
        return started

    def finish_all(self, keep: set[str] = frozenset()) -> None:
        for name, machine in self.pool.machines.items():
            for job in list(machine.claims):
                if job not in keep:
                    self.pool.finish_job(name, job)
        self.schedd.ads = [ad for ad in self.schedd.ads if f"{ad['ClusterId']}.{ad['ProcId']}" in keep]

    def loop(self) -> LoopResult:
        return self.scaler.run_once()


@pytest.fixture
def world(aws: str, tmp_path: Path) -> World:
    return World(aws, tmp_path)


@pytest.mark.slow
def test_scale_out_bin_packs_and_overflows_by_region(world: World) -> None:
    world.schedd.ads = [gpu_job(1, proc) for proc in range(20)]  # 16 GiB GPUs: T4s (15 GiB) do not fit
    result = world.loop()
    # 20 one-GPU jobs, 8 GPUs per p4de: 3 instances; us-east-1's group stops at 2, so 1 goes west.
    assert world.desired() == {"t4-east": 0, "a100-east": 2, "a100-west": 1}
    assert result.decision.plans["a100-east"].jobs == 16 and result.decision.plans["a100-west"].jobs == 4
    assert not result.decision.unmatched and not result.errors
    assert "a100-east" in result.report and "set p4de-east (us-east-1) desired capacity 0 -> 2" in result.report

    again = world.loop()  # instances still booting: the same demand asks for nothing more
    assert not again.done and world.desired() == {"t4-east": 0, "a100-east": 2, "a100-west": 1}
    world.boot()
    assert world.negotiate() == 20
    assert not world.loop().done


@pytest.mark.slow
def test_capacity_error_overflows_to_the_next_group(world: World) -> None:
    calls = []

    def no_capacity(params: dict, **kwargs: object) -> None:
        calls.append(params["body"]["AutoScalingGroupName"])
        raise ClientError(
            {"Error": {"Code": "InsufficientInstanceCapacity", "Message": "We currently do not have sufficient p4de"}},
            "SetDesiredCapacity",
        )

    world.scaler.cloud.client("us-east-1").meta.events.register(
        "before-call.autoscaling.SetDesiredCapacity", no_capacity
    )
    world.schedd.ads = [gpu_job(1, proc) for proc in range(20)]
    result = world.loop()
    assert calls == ["p4de-east"]
    assert world.desired() == {"t4-east": 0, "a100-east": 0, "a100-west": 2}
    assert result.decision.unsatisfied and result.decision.unsatisfied[0].count == 4
    assert "capacity timeout" in result.decision.unsatisfied[0].reason
    state = json.loads(world.state_path.read_text())
    assert state["capacity_timeouts"]["a100-east"] == world.now + 3600
    assert "InsufficientInstanceCapacity" in state["capacity_reasons"]["a100-east"]

    world.now += 600  # still timed out: east is not asked again
    world.new_autoscaler().cloud.client("us-east-1").meta.events.register(
        "before-call.autoscaling.SetDesiredCapacity", no_capacity
    )
    world.loop()
    assert calls == ["p4de-east"]
    world.now += 3600  # the timeout is over: east is tried again (and now has capacity)
    world.new_autoscaler()
    world.loop()
    assert world.desired()["a100-east"] == 1


def test_api_errors_mid_loop_then_the_next_loop_converges(world: World) -> None:
    failures = {"left": 1}

    def throttled(params: dict, **kwargs: object) -> None:
        if failures["left"]:
            failures["left"] -= 1
            raise ClientError({"Error": {"Code": "Throttling", "Message": "Rate exceeded"}}, "SetDesiredCapacity")

    world.scaler.cloud.client("us-west-2").meta.events.register("before-call.autoscaling.SetDesiredCapacity", throttled)
    world.schedd.ads = [gpu_job(1, proc) for proc in range(20)]
    first = world.loop()
    assert first.errors and "Throttling" in first.errors[0]
    assert world.desired() == {"t4-east": 0, "a100-east": 2, "a100-west": 0}  # east done, west failed
    second = world.loop()
    assert not second.errors
    assert world.desired() == {"t4-east": 0, "a100-east": 2, "a100-west": 1}
    assert not world.loop().done  # converged: nothing more to do


@pytest.mark.slow
def test_scale_in_drains_first_and_never_touches_a_busy_node(world: World) -> None:
    world.schedd.ads = [gpu_job(1, proc) for proc in range(20)]
    world.loop()
    world.boot()
    world.negotiate()
    busy_job = "1.0"
    busy_node = next(name for name, m in world.pool.machines.items() if busy_job in m.claims)
    world.finish_all(keep={busy_job})
    world.now += 100  # idle, but not for the grace period yet
    assert not world.loop().done

    world.now += 300
    drains = world.loop()
    drained = [call[1] for call in world.pool.calls if call[0] == "drain"]
    assert len(drained) == 1  # pool of 3, max_scale_in_fraction 0.5 -> 1 this loop; never the busy node
    assert busy_node not in drained
    assert world.pool.state(drained[0]) is NodeState.DRAINED
    assert any(line.startswith("drain node-") for line in drains.done)
    assert sum(world.desired().values()) == 3  # nothing terminated before the drain completes

    terminate = world.loop()
    assert any(line.startswith("terminate ") for line in terminate.done)
    world.boot()
    assert drained[0] not in world.pool.machines
    assert sum(world.desired().values()) == 2  # terminated with decrement
    for _ in range(6):
        world.now += 400
        world.loop()
        world.boot()
    assert set(world.pool.machines) == {busy_node}  # the busy node is the one that is left
    assert world.pool.state(busy_node) is NodeState.BUSY
    assert all(call[1] != busy_node for call in world.pool.calls if call[0] == "drain")


@pytest.mark.slow
def test_a_drain_cancelled_and_busy_again_is_never_terminated(world: World) -> None:
    world.schedd.ads = [gpu_job(1, 0)]
    world.loop()
    world.boot()
    world.negotiate()
    world.finish_all()
    world.now += 1000
    world.loop()  # drains the idle node
    (node,) = world.pool.machines
    assert world.pool.state(node) is NodeState.DRAINED
    world.pool.cancel_drain(node)  # an admin puts it back, and a job lands on it
    world.pool.start_job(node, "9.0", (1.0, 1.0, 1.0, 1.0))
    result = world.loop()
    assert not any(line.startswith("terminate") for line in result.done)
    assert node in world.pool.machines and json.loads(world.state_path.read_text())["removing"] == {}


@pytest.mark.slow
def test_restart_mid_scale_in_forgets_no_node(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.schedd.ads = [gpu_job(1, proc) for proc in range(2)]
    world.loop()
    world.boot()
    world.negotiate()
    world.finish_all()
    world.now += 1000

    def killed(name: str, reason: str) -> None:
        raise KeyboardInterrupt  # the process dies between recording the intent and sending the drain

    with monkeypatch.context() as patch:
        patch.setattr(world.pool, "drain", killed)
        with pytest.raises(KeyboardInterrupt):
            world.loop()
    state = json.loads(world.state_path.read_text())
    (name,) = state["removing"]
    assert state["removing"][name]["drain_sent"] is False

    world.new_autoscaler()  # restart: only the state file carries over
    resumed = world.loop()
    assert any(line.startswith(f"drain {name}") for line in resumed.done)
    assert world.pool.state(name) is NodeState.DRAINED
    world.loop()
    world.boot()
    assert name not in world.pool.machines  # drained, then terminated: not stranded


def test_restart_after_terminate_before_saving(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    world.schedd.ads = [gpu_job(1, 0)]
    world.loop()
    world.boot()
    world.negotiate()
    world.finish_all()
    world.now += 1000
    world.loop()  # drain

    def dies(self: StateFile, state: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(StateFile, "save", dies)
        with pytest.raises(KeyboardInterrupt):
            world.loop()  # terminate_instance_in_auto_scaling_group went through; the state was not saved
    assert not [i for i in world.asg("t4-east")["Instances"] + world.asg("a100-east")["Instances"]]
    assert json.loads(world.state_path.read_text())["removing"]
    world.boot()
    world.new_autoscaler()
    world.loop()
    assert json.loads(world.state_path.read_text())["removing"] == {}  # recognised as done, not stuck


def test_jobs_that_match_no_group_are_reported(world: World) -> None:
    world.schedd.ads = [gpu_job(7, proc, capability=9.0) for proc in range(3)] + [gpu_job(8, 0)]
    result = world.loop()
    (unmatched,) = result.decision.unmatched
    assert unmatched.count == 3 and unmatched.examples == ("7.0", "7.1", "7.2")
    assert "match no group" in unmatched.reason
    assert "jobs that match no group (they would sit idle forever)" in result.report
    assert world.desired()["a100-east"] == 1  # the job that does match still gets capacity


def test_cli_dry_run_does_nothing(world: World, tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.ads"
    jobs.write_text("\n\n".join(str(gpu_job(3, proc)) for proc in range(9)))
    nodes = tmp_path / "nodes.ads"
    nodes.write_text("")
    policy = tmp_path / "autoscale.yaml"
    policy.write_text(POLICY)
    state = tmp_path / "cli-state.json"
    result = CliRunner().invoke(
        app,
        [
            "autoscale",
            "--once",
            "--dry-run",
            "--policy",
            str(policy),
            "--jobs-file",
            str(jobs),
            "--nodes-file",
            str(nodes),
            "--endpoint-url",
            world.endpoint,
            "--state-file",
            str(state),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "[dry-run] would set p4de-east (us-east-1) desired capacity 0 -> 2" in result.stdout
    assert world.desired() == {"t4-east": 0, "a100-east": 0, "a100-west": 0}
    assert not state.exists()


@pytest.mark.slow
def test_a_node_advertising_another_instance_id_never_gets_a_busy_node_terminated(world: World) -> None:
    """Nodes are matched to instances by the private IP the cloud reports, not by the EC2InstanceId a
    startd advertises about itself: a lying idle node is drained and its own instance terminated."""
    asg = boto3.client("autoscaling", region_name="us-east-1", endpoint_url=world.endpoint)
    asg.set_desired_capacity(AutoScalingGroupName="p4de-east", DesiredCapacity=2)
    world.boot()
    busy, liar = sorted(world.pool.machines)
    busy_instance = world.pool.machines[busy].instance_id
    liar_instance = world.pool.machines[liar].instance_id
    world.pool.start_job(busy, "1.0", (4.0, 8192.0, 2048.0 * 1024, 1.0))
    world.pool.machines[liar].instance_id = busy_instance  # what its startd now advertises
    world.now += 1000
    first = world.loop()
    assert [a.describe().split(" (")[0] for a in first.decision.actions] == [f"drain {liar}"], first.report
    assert liar_instance in first.decision.actions[0].describe()
    world.now += 60
    second = world.loop()
    assert not second.errors, second.report
    live = {i["InstanceId"]: i["LifecycleState"] for i in world.asg("a100-east")["Instances"]}
    assert live.get(busy_instance) == "InService"
    assert liar_instance not in live or live[liar_instance].startswith("Terminat")
    assert world.pool.state(busy) is NodeState.BUSY
