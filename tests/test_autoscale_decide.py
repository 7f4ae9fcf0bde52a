"""The pure decision and the policy file: guards, signatures, the schedd query semantics, bad input."""

from __future__ import annotations

from pathlib import Path

import classad2
import pytest
from autoscale_pool import InMemoryPool
from typer.testing import CliRunner

from dagflow.autoscale.cloud import AsgState, Instance
from dagflow.autoscale.decide import Drain, decide, scale_in_limit
from dagflow.autoscale.demand import InMemorySchedd, ScheddDemand, signatures
from dagflow.autoscale.policy import load_policy, parse_policy
from dagflow.autoscale.state import State
from dagflow.cli import app
from dagflow.errors import SpecError

POLICY = """
settings: {idle_grace_s: 60, max_scale_in_fraction: 1.0}
groups:
  - {name: cpu, asg: cpu-asg, region: us-east-1, instance_type: c6i.4xlarge, min: 1, max: 10,
     machine: {Cpus: 16, Memory: 31000, Disk: 1000000, GPUs: 0}}
"""


def test_scale_in_limit_guards() -> None:
    assert scale_in_limit(0, 0.2, 0) == 0
    assert scale_in_limit(1, 0.2, 0) == 1  # a lone idle node may go (scale to zero)
    assert scale_in_limit(10, 0.2, 0) == 2
    assert scale_in_limit(10, 1.0, 0) == 5  # never more than half the pool
    assert scale_in_limit(10, 1.0, 4) == 1  # removals already in flight count against the half
    assert scale_in_limit(3, 0.1, 0) == 1


def test_never_more_than_half_and_never_below_min() -> None:
    policy = parse_policy(POLICY, "p.yaml")
    pool = InMemoryPool(clock=lambda: 0.0)
    instances = []
    for index in range(6):
        pool.add_node(f"n{index}", (16, 31000, 1000000, 0), f"i-{index}")
        instances.append(Instance(f"i-{index}", "InService"))
    asgs = {"cpu": AsgState("cpu-asg", "us-east-1", 6, 1, 10, tuple(instances))}
    decision = decide(policy, asgs, pool.nodes(), [], State(), now=1000.0)
    drains = [a for a in decision.actions if isinstance(a, Drain)]
    assert len(drains) == 3  # fraction 1.0 would allow 6; half the pool is the cap
    pool.machines["n0"].claims["1.0"] = (1, 1, 1, 0)
    one = {"cpu": AsgState("cpu-asg", "us-east-1", 2, 1, 10, tuple(instances[:2]))}
    nodes = [n for n in pool.nodes() if n.name in ("n0", "n1")]
    drains = [a for a in decide(policy, one, nodes, [], State(), now=1000.0).actions if isinstance(a, Drain)]
    assert [a.node for a in drains] == ["n1"]  # n0 is busy; n1 may go (min 1 is still met by n0)


def test_signatures_collapse_identical_jobs() -> None:
    ads = []
    for index in range(1000):
        ad = classad2.ClassAd({"ClusterId": index, "ProcId": 0, "JobStatus": 1, "RequestCpus": 1 + index % 2})
        ad["Requirements"] = classad2.ExprTree("TARGET.Cpus >= RequestCpus")
        ad["DagflowTrial"] = index  # identifies the job; does not change what it matches
        ads.append(ad)
    found = signatures(ads)
    assert sorted(s.count for s in found) == [500, 500]
    assert {s.request.cpus for s in found} == {1.0, 2.0}


def test_in_memory_schedd_has_query_semantics() -> None:
    running = classad2.ClassAd({"ClusterId": 1, "ProcId": 0, "JobStatus": 2, "RequestCpus": 1})
    idle = classad2.ClassAd({"ClusterId": 2, "ProcId": 0, "JobStatus": 1, "RequestCpus": 2, "Secret": "x"})
    schedd = InMemorySchedd([running, idle])
    (only,) = ScheddDemand(schedd).idle_jobs()
    assert only["ClusterId"] == 2 and "Secret" not in only  # constraint evaluated, projection applied
    assert schedd.queries == [("JobStatus == 1", ScheddDemand().projection)]


HEAD = "groups:\n  - {name: a, asg: b, region: r, instance_type: t, "


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("groups: []", "p.yaml:1:9: groups: expected a non-empty list"),
        (
            "groups:\n  - name: a\n    asg: b\n    region: r\n    instance_type: t\n    max: -1\n"
            "    machine: {Cpus: 1, Memory: 1}\n",
            "p.yaml:6:10: groups[0].max: must be at least 0",
        ),
        (
            "groups:\n  - {name: a, asg: b, region: r, instance_type: t, max: 1, machine: {Cpus: 1}}\n",
            "groups[0].machine: the machine template needs Memory",
        ),
        (
            HEAD + "max: 1, min: 2, machine: {Cpus: 1, Memory: 1}}\n",
            "min (2) is larger than max (1)",
        ),
        (
            "groups:\n  - {name: a, asg: b, region: r, instance_type: t, max: 1, machne: {}}\n",
            "groups[0].machne: unknown key",
        ),
        (
            HEAD + "max: 1, start: 'Cpus >', machine: {Cpus: 1, Memory: 1}}\n",
            "not a ClassAd expression",
        ),
        ("groups: [", "YAML syntax error"),
        ("", "the file is empty"),
    ],
)
def test_bad_policies_are_located(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_policy(text, "p.yaml")
    assert expected in str(caught.value)


def test_shipped_policy_loads() -> None:
    policy = load_policy()
    assert [g.name for g in policy.groups][:2] == ["cpu-use1", "t4-use1-spot"]
    assert policy.group("a100-usw2-spot").machine["DagflowRegion"] == "us-west-2"


def test_cli_bad_policy_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "autoscale.yaml"
    bad.write_text(
        "groups:\n  - {name: a, asg: b, region: r, instance_type: t, max: lots, machine: {Cpus: 1, Memory: 1}}\n"
    )
    result = CliRunner().invoke(app, ["autoscale", "--once", "--dry-run", "--policy", str(bad)])
    assert result.exit_code == 2
    assert f"{bad}:2:" in result.stderr and "expected an integer" in result.stderr
    assert "Traceback" not in result.output


# A GPU job's ad as HTCondor 25's condor_submit writes it for request_gpus = 1 and gpus_minimum_memory =
# 80000 (read back from the test pool's schedd): the per-GPU limit is a count over the machine's GPU ads.
CONDOR_SUBMIT_GPU_JOB = """
ClusterId = 75
ProcId = 0
JobStatus = 1
RequestCpus = 2
RequestMemory = 4096
RequestGPUs = 1
TransferInputSizeMB = 0
RequestDisk = MAX({ 1024,(TransferInputSizeMB + 1) * 1.25 }) * 1024
GPUsMinMemory = 80000
RequireGPUs = GlobalMemoryMb >= GPUsMinMemory
FileSystemDomain = "submit.example.org"
Requirements = (TARGET.Arch == "X86_64") && (TARGET.OpSys == "LINUX") && \
(versionGE(split(TARGET.CondorVersion)[1],"25.12.0") || (TARGET.Disk >= RequestDisk)) && \
(TARGET.Memory >= RequestMemory) && (TARGET.Cpus >= RequestCpus) && \
(countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs) && \
((TARGET.FileSystemDomain == MY.FileSystemDomain) || (TARGET.HasFileTransfer))
""".replace("\\\n", "")


def test_a_condor_submit_gpu_job_matches_only_groups_whose_gpus_are_big_enough() -> None:
    from dagflow.autoscale.matching import Matcher, matching_gpus

    job = next(iter(classad2.parseAds(CONDOR_SUBMIT_GPU_JOB)))
    policy = load_policy(None)
    matcher = Matcher(policy.groups)
    [signature] = signatures([job])
    names = [group.name for group in matcher.candidates(signature)]
    assert names and all(group.startswith("a100-") for group in names), names  # 80 GB A100s, not 16 GB T4s
    assert matching_gpus(job, policy.group("a100-use1-spot").machine_ad()) == 8
    assert matching_gpus(job, policy.group("t4-use1-spot").machine_ad()) == 0


def test_demand_asks_the_schedd_for_what_requirements_read() -> None:
    full = next(iter(classad2.parseAds(CONDOR_SUBMIT_GPU_JOB)))
    schedd = InMemorySchedd([full])
    [job] = ScheddDemand(schedd).idle_jobs()
    assert job.eval("RequireGPUs") is not None and job.get("GPUsMinMemory") == 80000
    assert job.eval("RequestDisk") == 1024 * 1024  # TransferInputSizeMB came along for RequestDisk
    first, *later = (set(projection) for _, projection in schedd.queries)
    assert "RequireGPUs" not in first and {"RequireGPUs", "TransferInputSizeMB", "GPUsMinMemory"} <= later[-1]
