"""The Grid Engine engine on a real one-node cluster (tests/sge_fixtures.py): the example pipeline, a failure
that stops only its descendants, retries with unless_exit, cancel, resume, and `dagflow status` agreeing
with `qstat -xml`; plus the shared node wrapper (engines/batch/node.py) on its own, without a cluster.

Waits are generous (minutes) and nothing asserts on wall-clock time: the cluster may share a small machine.
"""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batch_run import resume_sge, submit_sge, wait_sge
from rich.console import Console
from run_dir_support import states

from dagflow.engines.batch.node import main as node_main
from dagflow.engines.batch.records import BatchRecords
from dagflow.engines.registry import engine_class, read_run_status, run_session
from dagflow.engines.sge import SgeEngine, commands
from dagflow.engines.sge.submit import qsub_options, sge_units
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.status import RunStatus
from dagflow.run.status_view import print_status
from dagflow.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 300
on_cluster = pytest.mark.usefixtures("sge_cluster")


def plan_of(tmp_path: Path, text: str) -> Plan:
    (tmp_path / "pipeline.yaml").write_text(text)
    return expand(load_spec(tmp_path / "pipeline.yaml"))


def runs(tmp_path: Path) -> Path:
    return tmp_path / ".dagflow" / "runs"


def finish(layout: RunLayout) -> RunStatus:
    status = wait_sge(layout, poll_s=0.5, timeout_s=WAIT_S)
    assert not status.runner_alive, f"run {layout.run_id} still queued after {WAIT_S} s"
    return status


def rendered(status: RunStatus) -> str:
    out = io.StringIO()
    print_status(status, show_all=True, console=Console(file=out, width=200, color_system=None))
    return out.getvalue()


def run_jobs(jobs: list[str]) -> dict[str, str]:
    """Job number -> qstat state letters, for these jobs (one entry per job; an array's first task)."""
    states: dict[str, str] = {}
    for job in commands.queued_jobs():
        if job.job_id in jobs:
            states.setdefault(job.job_id, job.state)
    return states


def eventually(check, what: str, timeout: float = WAIT_S) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(0.3)


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=600
    )


# --- the engine contract and submission shape, no cluster --------------------------------------------------

ORDER = """name: order
matrix:
  region: [us, br, de]
steps:
  fetch: {command: [sh, -c, "sleep 0.3; echo {region} > fetched.{region}"]}
  train:
    command: [sh, -c, "test -f fetched.{region} && echo ok > trained.{region}"]
    needs: [fetch]
    resources: {cpus: 2, memory: 256MB}
    timeout: 2m
  gpu:
    command: [sh, -c, "echo gpu > gpu.txt"]
    needs: [fetch]
    over: [region]
    resources: {gpus: 2}
  report: {command: [sh, -c, "cat trained.* > report.txt"], needs: [train], over: [region]}
"""


def test_the_engine_is_registered_and_declares_what_it_honours() -> None:
    assert engine_class("sge") is SgeEngine
    assert SgeEngine.honours == {"cpus", "memory", "gpus", "timeout", "runtime.python"}


def test_steps_become_arrays_held_on_their_parents_with_placement(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ORDER)
    units = sge_units(plan, plan.nodes, max_array=75000)
    assert [(unit.name, sorted(unit.tasks)) for unit in units] == [
        ("fetch", [1, 2, 3]), ("train", [1, 2, 3]), ("gpu", [-1]), ("report", [-1]),
    ]  # fmt: skip
    records = BatchRecords(tmp_path / "run", "sge")
    train = qsub_options(plan, units[1], records)
    assert train[train.index("-pe") : train.index("-pe") + 3] == ["-pe", "smp", "2"]
    assert "mem_free=256M" in train and "-t" in train and train[train.index("-t") + 1] == "1-3"
    assert any(option.startswith("h_rt=") for option in train)
    gpu = qsub_options(plan, units[2], records)
    assert "gpu=2" in gpu and gpu[gpu.index("-N") + 1] == f"gpu.{plan.run_id}"
    assert "DagflowStep=gpu" in gpu[gpu.index("-ac") + 1]


def test_a_resume_renumbers_the_nodes_left_as_one_range(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ORDER)
    todo = ["fetch.br", "fetch.de", "train.br", "train.de"]
    units = sge_units(plan, todo, max_array=75000)
    assert [(unit.name, unit.tasks) for unit in units] == [
        ("fetch", {1: "fetch.br", 2: "fetch.de"}),
        ("train", {1: "train.br", 2: "train.de"}),
    ]
    assert units[1].unit_deps == [("aftercorr", 0)]


# --- the node wrapper on its own ---------------------------------------------------------------------------


def wrap(tmp_path: Path, node: str, *args: str) -> int:
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    base = ["--journal", str(tmp_path / "journal.jsonl"), "--logs", str(logs), "--node", node]
    return node_main([*base, "--workdir", str(tmp_path), *args])


def test_the_wrapper_retries_unless_exit_maps_reserved_exit_codes_and_stops_below_a_failure(tmp_path: Path) -> None:
    flaky = 'n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; echo try $n; test "$n" -ge 2'
    assert wrap(tmp_path, "flaky", "--retries", "3", "--", "sh", "-c", flaky) == 0
    assert wrap(tmp_path, "usage", "--retries", "3", "--unless-exit", "2", "--", "sh", "-c", "exit 2") == 2
    assert wrap(tmp_path, "error", "--", "sh", "-c", "exit 100") == 1  # 100 would be Grid Engine's error state
    assert wrap(tmp_path, "slow", "--timeout", "1", "--grace", "1", "--retries", "1", "--", "sleep", "30") == 143
    assert wrap(tmp_path, "missing", "--", "no-such-program-dagflow") == 127
    assert wrap(tmp_path, "child", "--parent", "flaky", "--parent", "usage", "--", "touch", "ran") == 1
    assert wrap(tmp_path, "grandchild", "--parent", "child", "--", "touch", "ran") == 1
    # A parent whose job was deleted before it journaled its end: not run, left for the status reader.
    assert wrap(tmp_path, "orphan", "--parent", "never-ended", "--", "touch", "ran") == 1
    assert wrap(tmp_path, "env", "--env", "GREETING=hi there", "--", "sh", "-c", "echo $DAGFLOW_NODE $GREETING") == 0
    nodes = read_journal(tmp_path / "journal.jsonl").nodes
    assert (nodes["flaky"].state, nodes["flaky"].attempts) == ("succeeded", 3)
    assert (nodes["usage"].state, nodes["usage"].attempts, nodes["usage"].why) == ("failed", 1, "exit code 2")
    assert (nodes["error"].rc, nodes["error"].why) == (100, "exit code 100")
    assert (nodes["slow"].state, nodes["slow"].attempts, nodes["slow"].why) == ("failed", 2, "timed out after 1s")
    assert nodes["missing"].why == "cannot start 'no-such-program-dagflow': No such file or directory"
    assert nodes["child"].state == nodes["grandchild"].state == "upstream_failed"
    assert nodes["grandchild"].why == "upstream usage failed"
    assert "orphan" not in nodes
    assert not (tmp_path / "ran").exists()
    logs = tmp_path / "logs"
    assert (logs / "flaky.out").read_text().split("\n")[:3] == ["try 0", "try 1", "try 2"]
    assert "=== dagflow: attempt 3 ===" in (logs / "flaky.err").read_text()
    assert (logs / "env.out").read_text() == "env hi there\n"


# --- on the cluster ----------------------------------------------------------------------------------------


@on_cluster
def test_a_plan_runs_in_dependency_order_with_arrays_cpus_and_gpus(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ORDER)
    submitted = submit_sge(plan, runs(tmp_path))
    assert submitted.nodes == 8 and len(submitted.jobs) == 4
    status = finish(submitted.layout)
    assert status.state == "succeeded", rendered(status)
    journal = read_journal(submitted.layout.journal_path)
    for name, node in plan.nodes.items():
        for parent in node.parents:
            assert journal.nodes[parent].ended <= journal.nodes[name].started, f"{name} before {parent}"  # type: ignore[operator]
    assert (tmp_path / "report.txt").read_text().split() == ["ok", "ok", "ok"]
    assert (tmp_path / "gpu.txt").read_text() == "gpu\n"
    assert "succeeded 8  (total 8)" in rendered(read_run_status(submitted.layout))


FAILING = """name: failing
matrix:
  region: [us, br]
steps:
  train: {command: [sh, -c, "test {region} != br || test -f fixed"], retries: {count: 2, unless_exit: [1]}}
  evaluate: {command: [sh, -c, "echo {region} > evaluated.{region}"], needs: [train]}
  report: {command: ["true"], needs: [evaluate], over: [region]}
  side: {command: [sh, -c, "sleep 1; echo side > side.txt"], over: [region]}
"""


@on_cluster
def test_a_failure_stops_only_its_descendants_and_resume_runs_only_what_did_not_succeed(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, FAILING)
    submitted = submit_sge(plan, runs(tmp_path))
    status = finish(submitted.layout)
    assert status.node_states() == {
        "train.us": "succeeded",
        "train.br": "failed",
        "evaluate.us": "succeeded",
        "evaluate.br": "upstream_failed",
        "report": "upstream_failed",
        "side": "succeeded",
    }, rendered(status)
    assert status.state == "failed"
    record = status.record("train.br")
    assert (record.attempts, record.rc, record.why) == (1, 1, "exit code 1"), "exit 1 is in unless_exit"
    assert status.record("report").why == "upstream train.br failed"
    assert not (tmp_path / "evaluated.br").exists()
    assert (tmp_path / "side.txt").read_text() == "side\n"
    assert run_jobs(submitted.jobs) == {}

    (tmp_path / "fixed").touch()
    resumed = resume_sge(submitted.layout.run_id, runs(tmp_path))
    assert resumed.sub == 2 and resumed.nodes == 3
    _, jobs = BatchRecords(submitted.layout.run_dir, "sge").latest()
    assert sorted(node for job in jobs for node in job.tasks.values()) == ["evaluate.br", "report", "train.br"]
    status = finish(submitted.layout)
    assert status.state == "succeeded", rendered(status)
    journal = read_journal(submitted.layout.journal_path)
    assert journal.nodes["train.us"].attempts == 1 and journal.nodes["side"].attempts == 1
    assert journal.nodes["train.br"].attempts == 2  # one per submission
    assert (tmp_path / "evaluated.br").exists()


RETRIES = """name: retries
steps:
  flaky:
    command: [sh, -c, "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; test $n -ge 2"]
    retries: 3
  usage: {command: [sh, -c, "exit 2"], retries: {count: 3, unless_exit: [2]}}
  error: {command: [sh, -c, "exit 100"]}
  after_error: {command: [touch, after_error], needs: [error]}
"""


@on_cluster
def test_retries_happen_inside_the_job_unless_exit_and_exit_100_does_not_hold_the_run(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, RETRIES)
    status = finish(submit_sge(plan, runs(tmp_path)).layout)
    flaky, usage, error = status.record("flaky"), status.record("usage"), status.record("error")
    assert (flaky.state, flaky.attempts) == ("succeeded", 3), rendered(status)
    assert (usage.state, usage.attempts, usage.rc) == ("failed", 1, 2)
    assert (error.state, error.rc) == ("failed", 100)
    assert status.record("after_error").state == "upstream_failed"
    assert not (tmp_path / "after_error").exists()
    assert status.state == "failed"


CANCEL = """name: cancel
matrix:
  shard: [a, b]
steps:
  long: {command: [sh, -c, "sleep 3607; echo done"]}
  after: {command: ["true"], needs: [long]}
"""


def sleepers() -> list[str]:
    done = subprocess.run(["pgrep", "-f", "sleep 3607"], capture_output=True, text=True, check=False)
    return done.stdout.split()


@on_cluster
def test_cancel_deletes_every_job_and_stops_the_running_nodes(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CANCEL)
    engine = SgeEngine()
    layout, work = run_session(engine).create(plan, runs(tmp_path))
    run_dir = layout.run_dir
    assert set(states(engine, run_dir).values()) == {"pending"}
    jobs = engine.launch(layout, work).handle.split(",")
    eventually(lambda: set(states(engine, run_dir).values()) >= {"running"}, "a long node running")
    assert read_run_status(layout).state == "running"
    engine.cancel(run_dir)
    status = read_run_status(layout)
    assert status.state == "interrupted"
    ended = status.node_states()
    assert {ended["after.a"], ended["after.b"]} == {"pending"}
    running = [name for name in ("long.a", "long.b") if ended[name] == "interrupted"]
    assert running and all(status.record(name).why == "cancelled" for name in running)
    assert run_jobs(jobs) == {}
    eventually(lambda: not sleepers(), "the cancelled nodes' processes gone", timeout=60)


WAITING = """name: waiting
steps:
  first: {command: [sh, -c, "while ! test -f go; do sleep 0.2; done"]}
  second: {command: ["true"], needs: [first]}
"""


@on_cluster
def test_status_agrees_with_qstat_while_running(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, WAITING)
    submitted = submit_sge(plan, runs(tmp_path))
    first, second = submitted.jobs
    try:
        _status_while_running(tmp_path, submitted.layout, first, second)
    finally:
        (tmp_path / "go").touch()
    status = finish(submitted.layout)
    assert status.state == "succeeded" and run_jobs(submitted.jobs) == {}


def _status_while_running(tmp_path: Path, layout: RunLayout, first: str, second: str) -> None:
    eventually(lambda: read_run_status(layout).node_states()["first"] == "running", "first running")
    states = read_run_status(layout).node_states()
    queued = run_jobs([first, second])
    assert states == {"first": "running", "second": "pending"}
    assert queued[first] in ("r", "t") and queued[second] == "hqw", queued  # t: running, being transferred
    shown = dagflow("status", layout.run_id, "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["state"] == "running" and view["sge"]["queued_nodes"] == 2


def copy_example(destination: Path) -> Path:
    shutil.copytree(
        REPO / "examples" / "region-retrain",
        destination,
        ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"),
    )
    return destination


@on_cluster
@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn")
def test_the_example_pipeline_runs_from_the_command_line_with_the_metrics_of_a_local_run(tmp_path: Path) -> None:
    on_sge, local = copy_example(tmp_path / "sge"), copy_example(tmp_path / "local")
    done = dagflow("run", "--engine", "sge", "pipeline.yaml", "--json", cwd=on_sge)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert status["state"] == "succeeded" and status["counts"] == {"succeeded": 13}
    assert dagflow("run", "pipeline.yaml", "--json", cwd=local).returncode == 0
    for region in ("us", "br", "de", "jp"):
        metrics = f"models/{region}/metrics.json"
        assert json.loads((on_sge / metrics).read_text()) == json.loads((local / metrics).read_text())
    assert json.loads((on_sge / "reports/report.json").read_text()) == json.loads(
        (local / "reports/report.json").read_text()
    )
    shown = dagflow("status", "--json", cwd=on_sge)
    assert shown.returncode == 0 and json.loads(shown.stdout) == status
    assert dagflow("logs", status["run_id"], "stage.us", cwd=on_sge).returncode == 0
