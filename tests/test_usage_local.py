"""The local engine measures every node attempt into usage.jsonl: real processes, real rusage.

Also: a measurement survives a runner killed with kill -9 (the keeper records it in procs.jsonl and the
next runner writes it), and GPU sampling, with a stand-in for NVML since this machine has no GPU (the
real NVML path is in test_usage_gpu_real.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from local_run import run_local
from terminal_support import in_a_terminal
from test_local_resume_adopt import alive, wait_for
from test_local_support import cli_env, dagflow_cli, make_plan, node, step
from usage_support import write_alloc

from dagflow.engines.local import RunOptions
from dagflow.engines.local import runner as runner_module
from dagflow.plan import Resources
from dagflow.run.usage import NodeUsage, decode_usage, encode_usage, latest_by_node, read_usage


def _runs(tmp_path: Path) -> Path:
    return tmp_path / ".dagflow" / "runs"


def _run(tmp_path: Path, steps: list, nodes: list, **options: object) -> Path:
    plan = make_plan(tmp_path, steps, nodes)
    run_local(plan, RunOptions(runs_dir=_runs(tmp_path), use_cache=False, **options))  # type: ignore[arg-type]
    run_dir = _runs(tmp_path) / plan.run_id
    _check_lines_are_encode_usage_s(run_dir)
    return run_dir


def _check_lines_are_encode_usage_s(run_dir: Path) -> None:
    """The runner writes its lines directly (usage_recorder.py): byte for byte what encode_usage writes."""
    for line in (run_dir / "usage.jsonl").read_bytes().splitlines(keepends=True):
        assert encode_usage(decode_usage(json.loads(line))) == line


def test_wall_cpu_and_peak_memory_of_each_node(tmp_path: Path) -> None:
    write_alloc(tmp_path)
    run_dir = _run(
        tmp_path,
        [step("big", resources=Resources(cpus=2, memory_mb=512)), step("small")],
        [node("big", "big", "exec python alloc.py 200 0.3"), node("small", "small", "python alloc.py 20 0")],
    )
    by_node = {record.node: record for record in read_usage(run_dir)}
    big, small = by_node["big"], by_node["small"]
    assert big.engine == "local" and big.step == "big" and big.attempt == 1 and big.exit_code == 0
    assert big.reason is None and big.host and big.slot in ("1", "2")
    assert big.cpu_s is not None and big.cpu_s >= 0.3
    assert big.wall_s is not None and big.wall_s >= big.cpu_s  # one thread: CPU time cannot exceed wall time
    assert big.started is not None and big.ended is not None
    assert big.ended - big.started == pytest.approx(big.wall_s, abs=0.002)  # each rounded to ms
    assert big.peak_memory_mb is not None and 200 <= big.peak_memory_mb < 400
    assert small.peak_memory_mb is not None and 20 <= small.peak_memory_mb < big.peak_memory_mb
    assert big.requested == {"cpus": 2, "memory_mb": 512, "disk_mb": 1024, "gpus": 0}
    assert big.allocated == {} and big.gpu_memory_peak_mb is None and big.gpu_utilization_pct is None


def test_a_shell_s_children_count_and_each_attempt_is_a_record(tmp_path: Path) -> None:
    """`sh -c` waits for its python: wait4's rusage of the shell includes it. A retry is a second record."""
    write_alloc(tmp_path)
    run_dir = _run(
        tmp_path, [step("s", retries=1)], [node("n", "s", "python alloc.py 150 0.1; python alloc.py 10 0; exit 3")]
    )
    records = read_usage(run_dir)
    assert [(r.node, r.attempt, r.exit_code) for r in records] == [("n", 1, 3), ("n", 2, 3)]
    for record in records:
        assert record.peak_memory_mb is not None and record.peak_memory_mb >= 150  # the largest child, not the sum
        assert record.cpu_s is not None and record.cpu_s >= 0.1
    assert latest_by_node(records)["n"].attempt == 2
    assert len({r.key for r in records}) == 2


def test_a_timed_out_node_says_so(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [step("s", timeout_s=1)], [node("slow", "s", "exec sleep 120")], kill_grace_s=0.5)
    (record,) = read_usage(run_dir)
    assert record.reason == "timeout" and record.exit_code == -signal.SIGTERM
    assert record.extra["signal"] == "SIGTERM"
    assert record.wall_s is not None and record.wall_s > 0


def test_a_node_that_never_started_has_no_record(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, [step("s")], [node("ok", "s", "true")])
    plan.nodes["ok"].argv = ["no-such-program-for-usage"]
    run_local(plan, RunOptions(runs_dir=_runs(tmp_path), use_cache=False))
    assert read_usage(_runs(tmp_path) / plan.run_id) == []


# --- a runner killed with kill -9 ------------------------------------------------------------------

HOLD = "python alloc.py 100 0.05; while [ ! -f release ]; do sleep 0.05; done"


def _start_and_kill_runner(tmp_path: Path) -> tuple[Path, int]:
    write_alloc(tmp_path)
    plan = make_plan(tmp_path, [step("s")], [node("long", "s", f"echo $$ > long.pid; {HOLD}")], run_id="ad")
    (tmp_path / "plan.json").write_text(plan.to_json())
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "plan.json", "--run-id", "ad", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(lambda: (tmp_path / "long.pid").exists() and (tmp_path / "long.pid").read_text().strip() != "")
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=60)
    pid = int((tmp_path / "long.pid").read_text())
    assert alive(pid)
    return _runs(tmp_path) / "ad", pid


def _check_one_measured_record(run_dir: Path, pid: int) -> NodeUsage:
    records = read_usage(run_dir)
    assert [(r.node, r.attempt) for r in records] == [("long", 1)]
    (record,) = records
    assert record.key is not None and record.key.endswith(f".{pid}")
    assert record.exit_code == 0 and record.peak_memory_mb is not None and record.peak_memory_mb >= 100
    assert record.cpu_s is not None and record.wall_s is not None and record.wall_s >= record.cpu_s * 0.5
    return record


@pytest.mark.slow
def test_a_node_that_ended_while_no_runner_lived_is_measured(tmp_path: Path) -> None:
    run_dir, pid = _start_and_kill_runner(tmp_path)
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    assert not (run_dir / "usage.jsonl").exists() or read_usage(run_dir) == []
    resumed = dagflow_cli("run", "--resume", "ad", "--kill-grace", "0.5", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    _check_one_measured_record(run_dir, pid)
    again = dagflow_cli("run", "--resume", "ad", cwd=tmp_path)  # nothing left to do: no second record
    assert again.returncode == 0, again.stdout + again.stderr
    _check_one_measured_record(run_dir, pid)


@pytest.mark.slow
def test_an_adopted_node_is_measured_by_the_keeper_that_started_it(tmp_path: Path) -> None:
    run_dir, pid = _start_and_kill_runner(tmp_path)
    resumed = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "--resume", "ad", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        journal = run_dir / "journal.jsonl"
        wait_for(lambda: journal.read_text().count('"e":"run"') == 2)
        (tmp_path / "release").touch()
        out, err = resumed.communicate(timeout=120)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    assert resumed.returncode == 0, out + err
    _check_one_measured_record(run_dir, pid)


@pytest.mark.slow
def test_a_record_the_killed_runner_wrote_is_not_doubled(tmp_path: Path) -> None:
    """The runner wrote the usage record, then died before journaling the end: the resume takes the exit
    from procs.jsonl again and appends the same record again; the reader keeps one (same key)."""
    run_dir, pid = _start_and_kill_runner(tmp_path)
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    resumed = dagflow_cli("run", "--resume", "ad", "--kill-grace", "0.5", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    usage_file = run_dir / "usage.jsonl"
    line = usage_file.read_bytes()
    journal = run_dir / "journal.jsonl"
    kept = [event for event in journal.read_text().splitlines() if '"e":"end"' not in event]
    journal.write_text("\n".join(kept) + "\n")  # as if the runner died between the two writes
    again = dagflow_cli("run", "--resume", "ad", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert usage_file.read_bytes() == line * 2
    _check_one_measured_record(run_dir, pid)


# --- GPUs: a stand-in for NVML --------------------------------------------------------------------


class StandInGpus:
    """Answers as NVML would: utilisation 50%; the compute processes the node lists in gpu_procs."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.samples = 0
        self.closed = False

    def utilization_pct(self, device: str) -> float | None:
        self.samples += 1
        return 50.0 if device == "1" else None

    def processes(self, device: str) -> list[tuple[int, float]]:
        listed = self.workdir / "gpu_procs"
        if not listed.exists():
            return []
        lines = [line.split() for line in listed.read_text().splitlines() if line.strip()]
        return [(int(pid), float(mb)) for pid, mb in lines]

    def memory_used_mb(self, device: str) -> float | None:
        return 99_999.0  # the whole device: must not be charged to a node whose processes NVML lists

    def close(self) -> None:
        self.closed = True


@pytest.mark.slow
def test_gpu_memory_and_utilization_are_sampled_while_a_gpu_node_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in = StandInGpus(tmp_path)
    monkeypatch.setattr(runner_module.NvmlReader, "open", classmethod(lambda cls: stand_in))
    # The node's child (same process group) holds 700 MB "on the GPU", then 1500 MB; a process of
    # another group (this test's own) holds 5000 MB on the same device.
    script = (
        f"echo {os.getpid()} 5000 > gpu_procs; sleep 3 & echo $! 700 >> gpu_procs; "
        "sleep 1.5; echo $$ 1500 >> gpu_procs; wait; rm gpu_procs"
    )
    run_dir = _run(
        tmp_path,
        [step("train", resources=Resources(gpus=1, memory_mb=16)), step("cpu")],
        [node("train", "train", script), node("plain", "cpu", "true")],
        gpus="1",
    )
    by_node = {record.node: record for record in read_usage(run_dir)}
    train = by_node["train"]
    assert train.gpu_utilization_pct == 50.0
    assert train.gpu_memory_peak_mb is not None and 700 <= train.gpu_memory_peak_mb <= 2200
    assert train.allocated == {"gpus": 1} and train.extra["gpu_devices"] == "1"
    assert by_node["plain"].gpu_memory_peak_mb is None and by_node["plain"].gpu_utilization_pct is None
    assert stand_in.samples >= 2 and stand_in.closed


def test_a_run_without_gpus_never_opens_nvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[bool] = []
    monkeypatch.setattr(runner_module.NvmlReader, "open", classmethod(lambda cls: opened.append(True)))
    run_dir = _run(tmp_path, [step("s")], [node("n", "s", "true")])
    assert opened == [] and len(read_usage(run_dir)) == 1


def test_usage_lines_are_plain_json(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, [step("s")], [node("n", "s", "true")])
    (line,) = (run_dir / "usage.jsonl").read_text().splitlines()
    assert json.loads(line)["node"] == "n"


# --- status ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_status_shows_each_node_s_latest_usage(tmp_path: Path) -> None:
    write_alloc(tmp_path)
    plan = make_plan(
        tmp_path, [step("s", resources=Resources(cpus=2, memory_mb=512), retries=1)],
        [node("n", "s", "python alloc.py 60 0; test -f again || { touch again; exit 3; }"),
         node("never", "s", "true", parents=["n"])],
    )  # fmt: skip
    (tmp_path / "plan.json").write_text(plan.to_json())
    ran = dagflow_cli("run", "plan.json", "--run-id", "st", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    shown = json.loads(dagflow_cli("status", "st", "--json", cwd=tmp_path).stdout)
    usage = {node["node"]: node["usage"] for node in shown["nodes"]}
    assert usage["n"]["attempt"] == 2 and usage["n"]["exit_code"] == 0 and usage["n"]["peak_memory_mb"] >= 60
    assert usage["n"]["requested"]["memory_mb"] == 512 and "node" not in usage["n"]
    assert usage["never"]["attempt"] == 1
    wide = subprocess.run(
        [sys.executable, "-m", "dagflow", "status", "st"], cwd=tmp_path, capture_output=True, text=True,
        env={**cli_env(), "COLUMNS": "140"}, timeout=60,
    )  # fmt: skip
    header = next(line for line in wide.stdout.splitlines() if line.strip().startswith("node"))
    assert header.split()[-3:] == ["mem", "MB", "why"] and "cpus" in header
    row = next(line for line in wide.stdout.splitlines() if line.strip().startswith("n "))
    assert "/2" in row and "/512" in row
    narrow = in_a_terminal(["status", "st"], tmp_path, columns=80)  # a pipe has no width: it gets them all
    assert "mem MB" not in narrow and "succeeded" in narrow
