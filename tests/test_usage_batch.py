"""Usage records on Slurm and Grid Engine: the shared node wrapper (engines/batch/node.py) measures each
attempt with wait4 and appends it to the run's usage.jsonl. On the real one-node clusters, and the wrapper
on its own (no cluster) for timeouts, retries and a command that cannot start."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest
from batch_run import submit_sge, submit_slurm, wait_sge, wait_slurm
from usage_support import write_alloc

from dagflow.engines.batch.node import main as node_main
from dagflow.engines.registry import read_run_status
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.usage import read_usage
from dagflow.spec import load_spec

WAIT_S = 300

PIPELINE = """name: measured
steps:
  big:
    command: python alloc.py 200 0.3
    resources: {cpus: 1, memory: 1GB}
  flaky:
    command: [sh, -c, "python alloc.py 50 0; exit 3"]
    retries: 1
"""


def plan_of(tmp_path: Path) -> Plan:
    write_alloc(tmp_path)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    return expand(load_spec(tmp_path / "pipeline.yaml"))


def check_records(run_dir: Path, engine: str) -> None:
    records = read_usage(run_dir)
    big = [r for r in records if r.node == "big"]
    flaky = [r for r in records if r.node == "flaky"]
    assert len(big) == 1 and [r.attempt for r in flaky] == [1, 2]
    (record,) = big
    assert record.engine == engine and record.step == "big" and record.exit_code == 0 and record.reason is None
    assert record.peak_memory_mb is not None and 200 <= record.peak_memory_mb < 400
    assert record.cpu_s is not None and record.cpu_s >= 0.3
    assert record.wall_s is not None and record.wall_s >= record.cpu_s
    assert record.requested["memory_mb"] == 1024 and record.requested["cpus"] == 1
    assert record.host and record.extra["job"]
    assert all(r.exit_code == 3 and r.peak_memory_mb is not None and r.peak_memory_mb >= 50 for r in flaky)


@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_nodes_are_measured_with_what_slurm_allocated(tmp_path: Path) -> None:
    submitted = submit_slurm(plan_of(tmp_path), tmp_path / ".dagflow" / "runs")
    status = wait_slurm(submitted.layout, poll_s=0.2, timeout_s=WAIT_S)
    assert not status.runner_alive
    check_records(submitted.layout.run_dir, "slurm")
    (big,) = [r for r in read_usage(submitted.layout.run_dir) if r.node == "big"]
    assert big.allocated.get("cpus", 0) >= 1 and big.allocated.get("memory_mb") == 1024
    nodes = {node["node"]: node for node in read_run_status(submitted.layout).to_dict()["nodes"]}
    assert nodes["big"]["usage"]["peak_memory_mb"] == big.peak_memory_mb
    assert nodes["flaky"]["usage"]["attempt"] == 2


@pytest.mark.usefixtures("sge_cluster")
def test_grid_engine_nodes_are_measured_with_their_slots(tmp_path: Path) -> None:
    submitted = submit_sge(plan_of(tmp_path), tmp_path / ".dagflow" / "runs")
    status = wait_sge(submitted.layout, poll_s=0.5, timeout_s=WAIT_S)
    assert not status.runner_alive
    check_records(submitted.layout.run_dir, "sge")
    (big,) = [r for r in read_usage(submitted.layout.run_dir) if r.node == "big"]
    assert big.allocated == {"cpus": 1} and big.slot  # NSLOTS and the queue
    nodes = {node["node"]: node for node in read_run_status(submitted.layout).to_dict()["nodes"]}
    assert nodes["big"]["usage"]["cpu_s"] == big.cpu_s


# --- the wrapper on its own -----------------------------------------------------------------------


def wrapper(tmp_path: Path, *args: str) -> int:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    write_alloc(tmp_path)
    return node_main(
        ["--journal", str(run_dir / "journal.jsonl"), "--logs", str(run_dir / "logs"), "--workdir", str(tmp_path),
         *args]
    )  # fmt: skip


def test_the_wrapper_records_each_attempt_and_the_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SLURM_JOB_ID", "SGE_ROOT", "SGE_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    rc = wrapper(
        tmp_path, "--node", "n", "--step", "train", "--request", "cpus=2", "--request=memory_mb=512",
        "--retries", "1", "--job", "42", "--", "sh", "-c", "python alloc.py 120 0.1; exit 5",
    )  # fmt: skip
    assert rc == 5
    records = read_usage(tmp_path / "run")
    assert [(r.attempt, r.exit_code, r.step) for r in records] == [(1, 5, "train"), (2, 5, "train")]
    for record in records:
        assert record.engine == "batch" and record.requested == {"cpus": 2, "memory_mb": 512}
        assert record.peak_memory_mb is not None and record.peak_memory_mb >= 120
        assert record.extra == {"job": "42"} and record.key is None


def test_a_timed_out_attempt_is_measured_after_it_is_stopped(tmp_path: Path) -> None:
    rc = wrapper(tmp_path, "--node", "slow", "--timeout", "0.5", "--grace", "1", "--", "sleep", "60")
    assert rc == 128 + signal.SIGTERM
    (record,) = read_usage(tmp_path / "run")
    assert record.reason == "timeout" and record.exit_code == -signal.SIGTERM and record.step == "slow"
    assert record.wall_s is not None and record.wall_s > 0


def test_a_command_that_cannot_start_has_no_record(tmp_path: Path) -> None:
    assert wrapper(tmp_path, "--node", "x", "--", "no-such-program-anywhere") == 127
    assert not (tmp_path / "run" / "usage.jsonl").exists()
    journal = (tmp_path / "run" / "journal.jsonl").read_text().splitlines()
    assert json.loads(journal[-1])["rc"] == 127


def test_a_bad_request_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        wrapper(tmp_path, "--node", "x", "--request", "cpus=two", "--", "true")
    assert exited.value.code == 2 and "--request" in capsys.readouterr().err
