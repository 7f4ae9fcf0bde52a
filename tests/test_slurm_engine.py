"""The Slurm engine on a real one-node cluster (tests/slurm_fixtures.py): dependency order, GPUs,
failures cancelling descendants, cancel, resume, the example pipeline, and `dagflow status` reading the
same journal the local engine writes."""

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
from batch_run import resume_slurm, submit_slurm, wait_slurm
from rich.console import Console
from run_dir_support import states

from dagflow.engines.batch.records import BatchRecords
from dagflow.engines.registry import read_run_status, run_session
from dagflow.engines.slurm import SlurmEngine, commands
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.status import RunStatus
from dagflow.run.status_view import print_status
from dagflow.spec import load_spec

pytestmark = pytest.mark.usefixtures("slurm_cluster")

REPO = Path(__file__).resolve().parents[1]
WAIT_S = 60


def plan_of(tmp_path: Path, text: str) -> Plan:
    (tmp_path / "pipeline.yaml").write_text(text)
    return expand(load_spec(tmp_path / "pipeline.yaml"))


def runs(tmp_path: Path) -> Path:
    return tmp_path / ".dagflow" / "runs"


def finish(layout: RunLayout) -> RunStatus:
    status = wait_slurm(layout, poll_s=0.2, timeout_s=WAIT_S)
    assert not status.runner_alive, f"run {layout.run_id} still queued after {WAIT_S} s"
    return status


def times(layout: RunLayout) -> dict[str, tuple[float, float]]:
    journal = read_journal(layout.journal_path)
    return {name: (record.started, record.ended) for name, record in journal.nodes.items()}  # type: ignore[misc]


def rendered(status: RunStatus) -> str:
    out = io.StringIO()
    print_status(status, show_all=True, console=Console(file=out, width=200, color_system=None))
    return out.getvalue()


ORDER = """name: order
matrix:
  region: [us, br, de]
steps:
  fetch: {command: [sh, -c, "sleep 0.3; echo {region} > fetched.{region}"]}
  train: {command: [sh, -c, "test -f fetched.{region} && echo ok > trained.{region}"], needs: [fetch]}
  gpu:
    command: [sh, -c, "echo $CUDA_VISIBLE_DEVICES > gpus.txt"]
    needs: [fetch]
    over: [region]
    resources: {gpus: 2}
  report: {command: [sh, -c, "cat trained.* > report.txt"], needs: [train], over: [region]}
"""


def test_a_plan_runs_in_dependency_order_and_a_gpu_step_gets_its_devices(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ORDER)
    submitted = submit_slurm(plan, runs(tmp_path))
    assert submitted.nodes == 8 and len(submitted.jobs) == 4  # fetch and train as arrays, gpu, report
    status = finish(submitted.layout)
    assert status.state == "succeeded", rendered(status)
    assert set(status.node_states().values()) == {"succeeded"}
    spans = times(submitted.layout)
    for name, node in plan.nodes.items():
        for parent in node.parents:
            assert spans[parent][1] <= spans[name][0], f"{name} started before its parent {parent} ended"
    assert (tmp_path / "report.txt").read_text().split() == ["ok", "ok", "ok"]
    devices = (tmp_path / "gpus.txt").read_text().strip().split(",")
    assert len(devices) == 2 and all(device.isdigit() for device in devices)
    # what `dagflow status` prints comes from the same journal and view as a local run's
    text = rendered(read_run_status(submitted.layout))
    assert "succeeded 8  (total 8)" in text and "report" in text


FAILING = """name: failing
matrix:
  region: [us, br]
steps:
  train: {command: [sh, -c, "test {region} != br || test -f fixed"], retries: {count: 2, unless_exit: [1]}}
  evaluate: {command: [sh, -c, "echo {region}"], needs: [train]}
  report: {command: ["true"], needs: [evaluate], over: [region]}
  side: {command: [sh, -c, "sleep 1; echo side > side.txt"], over: [region]}
"""


def test_a_failed_node_cancels_its_descendants_while_an_independent_branch_finishes_then_resume(
    tmp_path: Path,
) -> None:
    plan = plan_of(tmp_path, FAILING)
    submitted = submit_slurm(plan, runs(tmp_path))
    status = finish(submitted.layout)
    states = status.node_states()
    assert states == {
        "train.us": "succeeded",
        "train.br": "failed",
        "evaluate.us": "succeeded",
        "evaluate.br": "upstream_failed",
        "report": "upstream_failed",
        "side": "succeeded",
    }
    assert status.state == "failed"
    record = status.record("train.br")
    assert (record.attempts, record.rc, record.why) == (1, 1, "exit code 1"), "exit 1 is in unless_exit"
    assert status.record("report").why == "upstream train.br failed"
    assert (tmp_path / "side.txt").read_text() == "side\n"
    assert not [job for job in commands.queued_jobs() if job.job_id in submitted.jobs]

    (tmp_path / "fixed").touch()
    resumed = resume_slurm(submitted.layout.run_id, runs(tmp_path))
    assert resumed.sub == 2 and resumed.nodes == 3
    _, jobs = BatchRecords(submitted.layout.run_dir, "slurm").latest()
    assert sorted(node for job in jobs for node in job.tasks.values()) == ["evaluate.br", "report", "train.br"]
    status = finish(submitted.layout)
    assert status.state == "succeeded", rendered(status)
    journal = read_journal(submitted.layout.journal_path)
    assert journal.nodes["train.us"].attempts == 1 and journal.nodes["side"].attempts == 1
    assert journal.nodes["train.br"].attempts == 2  # one per submission


CANCEL = """name: cancel
steps:
  long: {command: [sleep, "60"]}
  after: {command: ["true"], needs: [long]}
"""


def test_cancel_through_the_engine_contract_stops_running_nodes_and_drops_pending_ones(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CANCEL)
    engine = SlurmEngine()
    layout, work = run_session(engine).create(plan, runs(tmp_path))
    run_dir = layout.run_dir
    assert states(engine, run_dir) == {"long": "pending", "after": "pending"}
    jobs = engine.launch(layout, work).handle.split(",")
    deadline = time.monotonic() + 20
    while states(engine, run_dir)["long"] != "running":
        assert time.monotonic() < deadline, "the long node never started"
        time.sleep(0.1)
    assert read_run_status(layout).state == "running"
    engine.cancel(run_dir)
    status = read_run_status(layout)
    assert status.state == "interrupted"
    assert status.node_states() == {"long": "interrupted", "after": "pending"}
    assert status.record("long").why == "cancelled"
    assert not [job for job in commands.queued_jobs() if job.job_id in jobs]


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


@pytest.mark.skipif(importlib.util.find_spec("sklearn") is None, reason="needs scikit-learn")
def test_the_example_pipeline_runs_end_to_end_from_the_command_line(tmp_path: Path) -> None:
    workdir = tmp_path / "region-retrain"
    shutil.copytree(
        REPO / "examples" / "region-retrain",
        workdir,
        ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"),
    )
    done = dagflow("run", "--engine", "slurm", "pipeline.yaml", "--json", cwd=workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    assert status["state"] == "succeeded" and status["counts"] == {"succeeded": 13}
    report = json.loads((workdir / "reports" / "report.json").read_text())
    assert report["summary"]["regions"] == 4
    shown = dagflow("status", "--json", cwd=workdir)
    assert shown.returncode == 0 and json.loads(shown.stdout) == status
    assert dagflow("logs", status["run_id"], "stage.us", cwd=workdir).returncode == 0
