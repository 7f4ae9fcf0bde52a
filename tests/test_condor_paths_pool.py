"""The HTCondor paths besides `dagflow submit`, each on the real one-machine pool (tests/condor_pool.py):
a Bayesian search whose trials are DAGMan jobs, an HTCondor cron schedule that fires and is removed, the
autoscaler reading idle GPU demand from the schedd, and the node agent's configuration loaded by the
pool's startd. Every job a test submits is removed in its `finally`, and the pool's configuration is
put back as it was."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import boto3
import classad2
import pytest
from aws_fixtures import ImdsState, create_asg
from condor_helpers import advertised_attributes
from condor_pool import Pool
from test_search_scheduler_support import trial_rows

from dagflow.agent.configure import ConfigureOptions, configure
from dagflow.agent.imds import Imds
from dagflow.gpus import GpuSummary, parse_nvidia_smi

pytestmark = pytest.mark.condor_pool

DATA = Path(__file__).parent / "data"


def remove_jobs_under(pool: Pool, directory: Path) -> None:
    """condor_rm every job whose initial directory lies under `directory` (DAGMan jobs and their nodes)."""
    prefix = str(directory)
    constraint = f"substr(Iwd, 0, {len(prefix)}) == {classad2.quote(prefix)}"
    pool.run(["condor_rm", "-constraint", constraint], check=False)


def queued(pool: Pool, cluster: int, *attributes: str) -> list[str]:
    """The cluster's job attributes (one line per job) while it is in the queue; [] once it has left."""
    done = pool.run(["condor_q", str(cluster), "-af", *attributes])
    return done.stdout.splitlines()


# -- 1. dagflow search run --engine condor -------------------------------------------------------------

SEARCH_PIPELINE = """\
name: tiny-search
params:
  x: 0.5
steps:
  evaluate:
    kind: evaluate
    command: python objective.py --x {params.x} --out out/{run.id}/metrics.json
    outputs:
      - out/{run.id}/metrics.json
    metrics: out/{run.id}/metrics.json
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1.0, max: 1.0}
  budget: 3
  parallel: 2
"""

OBJECTIVE = """\
import argparse, json, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--out")
args = parser.parse_args()
out = pathlib.Path(args.out)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"loss": (args.x - 0.3) ** 2}))
"""


def test_search_runs_its_trials_as_dagman_jobs(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("search")
    (work / "pipeline.yaml").write_text(SEARCH_PIPELINE)
    (work / "objective.py").write_text(OBJECTIVE)
    pool.give(work)
    try:
        run = ["search", "run", "pipeline.yaml", "--engine", "condor", "--seed", "7", "--poll", "2"]
        done = pool.dagflow(
            [*run, "--budget", "3", "--parallel", "2", "--batch", "--start-grace", "10m"], cwd=work, timeout=900
        )
        assert "search tiny-search done: best loss=" in done.stdout, done.stdout
        assert "parallel 2 (synchronous batches)" in done.stdout, done.stdout
        status = pool.dagflow(["search", "status", "tiny-search", "--json", "--no-plot"], cwd=work)
        trials = json.loads(status.stdout)["trials"]
    finally:
        remove_jobs_under(pool, work)
    assert [trial["state"] for trial in trials] == ["succeeded"] * 3, trials
    rows = trial_rows(work / ".dagflow" / "search.db")  # --batch: trial 3 chosen once trials 1 and 2 ended
    assert float(rows[2]["created"]) >= max(float(row["finished"]) for row in rows[:2]), rows  # type: ignore[arg-type]
    for trial in trials:
        run_dir = work / ".dagflow" / "runs" / trial["run_id"]
        assert (run_dir / "condor").is_dir(), f"trial {trial['run_id']} did not run on the condor engine"
        metrics = json.loads((work / "out" / trial["run_id"] / "metrics.json").read_text())
        assert trial["value"] == pytest.approx(metrics["loss"])
        assert metrics["loss"] == pytest.approx((trial["params"]["x"] - 0.3) ** 2)


def test_a_stopped_search_removes_its_dagman_jobs_and_continues(condor_pool: Pool) -> None:
    """SIGTERM to the scheduler while both trials run: each trial's DAGMan job is removed from the queue
    (CondorEngine.cancel), the trials are recorded cancelled, and the same command finishes the search."""
    pool = condor_pool
    work = pool.workdir("search-stop")
    (work / "pipeline.yaml").write_text(SEARCH_PIPELINE)
    slow = OBJECTIVE.replace("import argparse", "import time; time.sleep(600); import argparse")
    (work / "objective.py").write_text(slow)
    pool.give(work)
    run = ["search", "run", "pipeline.yaml", "--engine", "condor", "--seed", "7", "--poll", "2", "--start-grace", "10m"]
    argv = pool._as_user([sys.executable, "-m", "dagflow", *run], None)
    scheduler = subprocess.Popen(argv, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        runs = work / ".dagflow" / "runs"
        pool.wait_until(lambda: len(clusters_of(runs)) == 2, "both trials submitted", 300)
        dagman = clusters_of(runs)
        assert all(queued(pool, cluster, "JobStatus") for cluster in dagman)
        # SIGTERM to the scheduler itself: runuser would pass it on but SIGKILL it 2 s later
        os.kill(innermost(scheduler.pid), signal.SIGTERM)
        output, _ = scheduler.communicate(timeout=300)
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
        remove_jobs_under(pool, work)
    assert scheduler.returncode == 130, output
    assert output.count("cancelled: stopped with the scheduler") == 2, output
    for cluster in dagman:
        pool.wait_until(lambda c=cluster: not queued(pool, c, "JobStatus"), f"DAGMan job {cluster} to leave", 120)

    (work / "objective.py").write_text(OBJECTIVE)
    pool.give(work)
    try:
        done = pool.dagflow(run, cwd=work, timeout=900)
    finally:
        remove_jobs_under(pool, work)
    assert "search tiny-search done" in done.stdout, done.stdout
    status = json.loads(pool.dagflow(["search", "status", "--json", "--no-plot"], cwd=work).stdout)
    states = [trial["state"] for trial in status["trials"]]
    assert states.count("cancelled") == 2 and states.count("succeeded") == 3, states


def innermost(pid: int) -> int:
    """The process at the end of a chain of single children (runuser -> env's exec of python)."""
    while True:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) != 1:
            return pid
        pid = int(children[0])


def clusters_of(runs: Path) -> list[int]:
    """The DAGMan cluster of every submitted trial run under `runs` (from each run's condor record)."""
    clusters = []
    for record in runs.glob("tiny-search-t*/condor/run.json"):
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            continue
        clusters += [int(entry["cluster"]) for entry in data.get("submissions", []) if "cluster" in entry]
    return clusters


# -- 2. dagflow schedule install --condor / remove --------------------------------------------------------

SCHEDULED_PIPELINE = """\
name: tick
steps:
  stamp:
    command: [python, -c, "import time; open('fired.txt', 'a').write(str(time.time()))"]
    outputs: [fired.txt]          # declared: the transfer data mode (the default) sends it back
schedule: {cron: "* * * * *"}
"""


def test_schedule_install_condor_fires_and_remove_takes_it_out_of_the_queue(condor_pool: Pool) -> None:
    """A per-minute HTCondor cron job: its first firing runs `dagflow submit`, whose DAG runs the step.
    Firings happen at minute boundaries, so the waits allow a few minutes on a loaded machine."""
    pool = condor_pool
    work = pool.workdir("schedule")
    (work / "pipeline.yaml").write_text(SCHEDULED_PIPELINE)
    pool.give(work)
    cluster = None
    try:
        installed = pool.dagflow(["schedule", "install", "--condor", "pipeline.yaml"], cwd=work)
        match = re.search(r"HTCondor cron job (\d+)\.0", installed.stdout)
        assert match, installed.stdout
        cluster = int(match.group(1))
        attributes = queued(pool, cluster, "JobUniverse", "OnExitRemove", "CronMinute", "DagflowSchedulePipeline")
        assert attributes == [f"12 false * {work / 'pipeline.yaml'}"], attributes  # 12: the local universe
        listed = pool.dagflow(["schedule", "list"], cwd=work)  # the queue, not only the crontab (#28 8a)
        assert f"{work / 'pipeline.yaml'}\n  * * * * * (HTCondor cron job {cluster}): next " in listed.stdout, listed

        runs = work / ".dagflow" / "runs"
        pool.wait_until(lambda: runs.is_dir() and any(runs.glob("tick-*")), "the cron job's first firing", 300)
        pool.wait_until(lambda: (work / "fired.txt").exists(), "the DAG the firing submitted to run the step", 300)
        starts = queued(pool, cluster, "NumJobStarts")
        assert starts and int(starts[0]) >= 1, starts
        err = work / ".dagflow" / "schedule" / "tick.condor.err"  # schedule logs are named after the pipeline
        assert "error" not in err.read_text(), err.read_text()

        removed = pool.dagflow(["schedule", "remove", "pipeline.yaml"], cwd=work)
        assert "removed 1 HTCondor cron job(s)" in removed.stdout, removed.stdout
        pool.wait_until(lambda: not queued(pool, cluster, "JobStatus"), f"cron job {cluster} to leave the queue", 120)
        again = pool.dagflow(["schedule", "remove", "pipeline.yaml"], cwd=work)
        assert "no schedule installed" in again.stdout, again.stdout
        listed = pool.dagflow(["schedule", "list", "pipeline.yaml"], cwd=work)
        assert "no dagflow schedule installed for pipeline.yaml" in listed.stdout, listed
    finally:
        if cluster is not None:
            pool.run(["condor_rm", str(cluster)], check=False)
        remove_jobs_under(pool, work)


# -- 3. dagflow autoscale --once --dry-run against the schedd ----------------------------------------------

AUTOSCALE_POLICY = """\
settings:
  demand_attributes: [DagflowTeam]
defaults:
  machine: {{OpSys: LINUX, Arch: X86_64, HasFileTransfer: true}}
groups:
  - name: t4-test
    asg: {prefix}-g4dn
    region: us-east-1
    instance_type: g4dn.xlarge
    max: 4
    priority: 1
    start: 'TARGET.DagflowTeam =?= "{team}"'
    machine: {{Cpus: 4, Memory: 15000, Disk: 100000000, GPUs: 1, GPUs_GlobalMemoryMb: 15360,
               CUDACapability: 7.5, DagflowGpuModel: Tesla T4}}
  - name: a100-test
    asg: {prefix}-p4de
    region: us-east-1
    instance_type: p4de.24xlarge
    max: 2
    priority: 2
    start: 'TARGET.DagflowTeam =?= "{team}"'
    machine: {{Cpus: 96, Memory: 1140000, Disk: 900000000, GPUs: 8, GPUs_GlobalMemoryMb: 81920,
               CUDACapability: 8.0, DagflowGpuModel: NVIDIA A100-SXM4-80GB}}
"""

IDLE_GPU_JOBS = """\
universe            = vanilla
executable          = /bin/true
request_cpus        = 2
request_memory      = 4096
request_gpus        = 1
gpus_minimum_memory = 80000
My.DagflowTeam      = "{team}"
log                 = idle.log
queue 3
"""


def test_autoscale_dry_run_sees_idle_gpu_demand_in_the_schedd(condor_pool: Pool, aws: str) -> None:
    """Three jobs that need an 80 GB GPU (more than the pool's simulated GPUs have) sit idle; one dry-run
    loop, against a moto server for EC2 Auto Scaling, sizes the A100 group for them and not the T4 one.
    The groups' START admits only this test's jobs, so other tests' jobs in the shared queue do not count."""
    pool = condor_pool
    work = pool.workdir("autoscale")
    team = f"autoscale-test-{os.getpid()}"
    prefix = f"dagflow-test-{os.getpid()}"
    create_asg(aws, "us-east-1", f"{prefix}-g4dn", "g4dn.xlarge", 4)
    create_asg(aws, "us-east-1", f"{prefix}-p4de", "p4de.24xlarge", 2)
    (work / "autoscale.yaml").write_text(AUTOSCALE_POLICY.format(prefix=prefix, team=team))
    (work / "idle.sub").write_text(IDLE_GPU_JOBS.format(team=team))
    pool.give(work)
    aws_env = {name: os.environ[name] for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}
    cluster = None
    try:
        submitted = pool.run(["condor_submit", "idle.sub"], cwd=work)
        cluster = int(re.search(r"submitted to cluster (\d+)", submitted.stdout).group(1))  # type: ignore[union-attr]
        assert queued(pool, cluster, "JobStatus") == ["1"] * 3
        state = work / "state.json"
        args = ["autoscale", "--once", "--dry-run", "--policy", str(work / "autoscale.yaml")]
        done = pool.dagflow(
            [*args, "--state-file", str(state), "--endpoint-url", aws], cwd=work, env=aws_env
        )
    finally:
        if cluster is not None:
            pool.run(["condor_rm", str(cluster)], check=False)
    report = done.stdout
    assert f"would set {prefix}-p4de (us-east-1) desired capacity 0 -> 1: 3 idle jobs" in report, report
    assert not [line for line in report.splitlines() if "would set" in line and f"{prefix}-g4dn" in line], report
    assert not state.exists()  # a dry run remembers nothing
    groups = boto3.client("autoscaling", region_name="us-east-1", endpoint_url=aws).describe_auto_scaling_groups(
        AutoScalingGroupNames=[f"{prefix}-p4de"]
    )["AutoScalingGroups"]
    assert groups[0]["DesiredCapacity"] == 0


# -- 4. the node agent's configuration, loaded by the pool's startd -----------------------------------------

# What the agent writes that must not reach the shared pool: `use role : execute` (DAEMON_LIST), CONDOR_HOST,
# `use feature : GPUs` (the pool's simulated GPU discovery) and security settings.
_ATTRIBUTE_LINE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*) = ")


def safe_lines(text: str) -> str:
    """Only the machine-ad attributes and the STARTD_ATTRS line that advertises them."""
    advertised = set(next(line for line in text.splitlines() if line.startswith("STARTD_ATTRS =")).split()[3:])
    kept = []
    for line in text.splitlines():
        match = _ATTRIBUTE_LINE.match(line)
        if match and (match.group(1) in advertised or match.group(1) == "STARTD_ATTRS"):
            kept.append(line)
    return "\n".join(kept) + "\n"


def master_pid(pool: Pool) -> int:
    """condor_master's pid: master.pid holds the runuser that started it, its parent."""
    pid = int((pool.config.parent / "master.pid").read_text().strip())
    for candidate in [pid, *map(int, Path(f"/proc/{pid}/task/{pid}/children").read_text().split())]:
        argv0 = Path(f"/proc/{candidate}/cmdline").read_bytes().split(b"\0")[0]
        if argv0.endswith(b"condor_master"):
            return candidate
    raise AssertionError(f"no condor_master under pid {pid}")


def partitionable_slot(pool: Pool, attributes: list[str]) -> classad2.ClassAd:
    done = pool.run(["condor_status", "-constraint", 'SlotType == "Partitionable"', "-long", "-attributes",
                     ",".join(["Name", *attributes])])  # fmt: skip
    ads = list(classad2.parseAds(done.stdout))
    assert len(ads) == 1, done.stdout
    return ads[0]


def test_agent_config_is_loaded_by_the_pools_startd(
    condor_pool: Pool, imds: tuple[str, ImdsState], tmp_path: Path
) -> None:
    """`dagflow agent configure`'s file for an 8 x A100 spot instance (captured nvidia-smi output, a stand-in
    IMDS), checked in full with this HTCondor's condor_config_val, then loaded by the pool's startd in part:
    only the attributes it advertises and its STARTD_ATTRS line (safe_lines: the rest would turn the shared
    pool into an execute node of cm.example.org). condor_status must show each with the value HTCondor's
    reader gives the full file; the file is removed and the startd reconfigured again afterwards."""
    pool = condor_pool
    endpoint, state = imds
    state.metadata["instance-id"] = f"i-{os.getpid():017x}"
    gpus = GpuSummary.of(parse_nvidia_smi((DATA / "nvidia-smi-8xA100-80GB.csv").read_text()), "nvidia-smi")
    options = ConfigureOptions(config_dir=tmp_path / "config.d", central_manager="cm.example.org:9618", reconfig=False)
    result = configure(options, gpus, Imds(endpoint).identity(), detect=False)

    work = pool.workdir("agent")
    full = work / "50-dagflow-agent.conf"
    full.write_text(result.text)
    check = work / "condor_config"
    check.write_text(f"include : {pool.config}\ninclude : {full}\n")
    pool.give(work)
    checked = pool.run(["condor_config_val", "-config"], env={"CONDOR_CONFIG": str(check)})
    assert str(full) in checked.stdout, checked.stdout
    values = pool.run(["condor_config_val", "CONDOR_HOST", "EC2InstanceId"], env={"CONDOR_CONFIG": str(check)})
    assert values.stdout.split() == ["cm.example.org:9618", f'"{state.metadata["instance-id"]}"'], values.stdout

    expected = advertised_attributes(full)
    names = [name for name in expected if name != "HAS_GPU"]  # HAS_GPU: the pool advertises it already
    assert {"EC2InstanceId", "EC2InstanceType", "EC2Lifecycle", "DagflowRegion", "CUDACapability"} <= set(names)
    loaded = pool.config.parent / "config.d" / f"90-dagflow-agent-test-{os.getpid()}.conf"
    loaded.write_text(safe_lines(result.text))
    loaded.chmod(0o644)
    try:
        os.kill(master_pid(pool), signal.SIGHUP)

        def advertising() -> classad2.ClassAd | None:
            ad = partitionable_slot(pool, names)
            return ad if ad.get("EC2InstanceId") == state.metadata["instance-id"] else None

        slot = pool.wait_until(advertising, "the startd to advertise the agent's attributes", 180)
        for name in names:
            assert str(slot.lookup(name)) == str(expected.lookup(name)), name  # type: ignore[union-attr]
    finally:
        loaded.unlink(missing_ok=True)
        os.kill(master_pid(pool), signal.SIGHUP)
    pool.wait_until(
        lambda: "EC2InstanceId" not in partitionable_slot(pool, ["EC2InstanceId"]),
        "the startd to stop advertising the agent's attributes",
        180,
    )
