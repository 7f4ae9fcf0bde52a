"""`dagflow run | status | logs` as subprocesses: kill -9 and resume, Ctrl-C and resume, orphans,
JSON events, and clean exit-2 errors."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from test_local_support import cli_env, dagflow_cli, make_plan, node, step

from dagflow.plan import Node, Resources
from dagflow.run.journal import JournalState, read_journal


def write_plan(tmp_path: Path, plan_nodes: list, steps: list | None = None) -> Path:
    plan = make_plan(tmp_path, steps or [step("s"), step("long", priority=10)], plan_nodes)
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    return path


def start_runner(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", *args],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def journal_of(tmp_path: Path, run_id: str) -> JournalState:
    return read_journal(tmp_path / ".dagflow" / "runs" / run_id / "journal.jsonl")


def succeeded(tmp_path: Path, run_id: str) -> set[str]:
    return {name for name, r in journal_of(tmp_path, run_id).nodes.items() if r.state == "succeeded"}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_kill_9_of_the_runner_then_resume_reruns_no_finished_node(tmp_path: Path) -> None:
    count = 'echo "$DAGFLOW_NODE" >> counter; sleep 0.05'
    nodes = [node(f"n{i:02d}", "s", count, parents=[f"n{i - 10:02d}"] if i >= 10 else []) for i in range(40)]
    # still running when the runner dies: it runs on, and the resume takes it over (adopts it or takes
    # its result) instead of running it again
    long = "echo x >> counter.long; echo $$ > long.pid; while [ ! -f long.go ]; do sleep 0.05; done"
    nodes.append(node("long", "long", long))
    plan = write_plan(tmp_path, nodes)
    runner = start_runner(tmp_path, str(plan), "--run-id", "k9", "--jobs", "2", "--no-cache", "--kill-grace", "0.5")
    wait_for(lambda: len(succeeded(tmp_path, "k9")) >= 8 and (tmp_path / "long.pid").exists())
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=120)
    finished_before = succeeded(tmp_path, "k9")
    orphan = int((tmp_path / "long.pid").read_text())
    assert alive(orphan)

    status = dagflow_cli("status", "k9", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["state"] == "stopped"

    (tmp_path / "long.go").touch()
    resumed = dagflow_cli("run", "--resume", "k9", "--no-cache", "--kill-grace", "0.5", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    wait_for(lambda: not alive(orphan))
    runs = Counter((tmp_path / "counter").read_text().split())
    assert set(runs) == {f"n{i:02d}" for i in range(40)}
    assert all(runs[name] == 1 for name in finished_before), "a node finished before the kill ran again"
    assert len((tmp_path / "counter.long").read_text().split()) == 1
    assert json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)["counts"] == {"succeeded": 41}


@pytest.mark.slow
def test_sigint_stops_cleanly_and_resume_finishes(tmp_path: Path) -> None:
    slow = 'echo "$DAGFLOW_NODE" >> counter; test -f go && exit 0; sleep 60'
    stubborn = 'trap "" TERM; echo "$DAGFLOW_NODE" >> counter; test -f go && exit 0; sleep 60'
    nodes = [node(f"q{i}", "s", 'echo "$DAGFLOW_NODE" >> counter') for i in range(3)]
    nodes += [node("slow", "long", slow), node("stubborn", "long", stubborn), node("tail", "s", slow, parents=["slow"])]
    plan = write_plan(tmp_path, nodes)
    runner = start_runner(tmp_path, str(plan), "--run-id", "int", "--jobs", "4", "--json", "--kill-grace", "0.5")
    wait_for(lambda: succeeded(tmp_path, "int") >= {"q0", "q1", "q2"})
    # Each counts itself once running (the stubborn one after installing its trap): the journal's record
    # of a start comes before the node's shell has run a line.
    counter = tmp_path / "counter"
    wait_for(lambda: {"slow", "stubborn"} <= set(counter.read_text().split()))
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 130, err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["event"] == "run_started" and events[-1]["event"] == "run_finished"
    assert events[-1]["state"] == "interrupted"
    states = {n: r.state for n, r in journal_of(tmp_path, "int").nodes.items()}
    assert states["slow"] == states["stubborn"] == "interrupted"
    assert "tail" not in states  # never started

    status = dagflow_cli("status", "int", cwd=tmp_path)
    assert status.returncode == 0 and "interrupted" in status.stdout and "--resume int" in status.stdout

    (tmp_path / "go").touch()
    resumed = dagflow_cli("run", "--resume", "int", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    runs = Counter((tmp_path / "counter").read_text().split())
    assert runs == {"q0": 1, "q1": 1, "q2": 1, "slow": 2, "stubborn": 2, "tail": 1}


@pytest.mark.slow
def test_status_and_logs_of_a_finished_run(tmp_path: Path) -> None:
    missing = Node(name="missing", step="s", argv=["./no-such-program"], env={}, coords={})
    plan = write_plan(
        tmp_path, [node("hello", "s", "echo to-out; echo to-err >&2"), node("bad", "s", "exit 7"), missing]
    )
    done = dagflow_cli("run", str(plan), "--run-id", "one", cwd=tmp_path)
    assert done.returncode == 1
    assert "failed bad: exit code 7" in done.stdout
    assert "failed missing: cannot start './no-such-program'" in done.stdout
    assert dagflow_cli("logs", "one", "hello", cwd=tmp_path).stdout == "to-out\n"
    assert dagflow_cli("logs", "latest", "hello", "--err", cwd=tmp_path).stdout == "to-err\n"
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert status["run_id"] == "one" and status["counts"] == {"succeeded": 1, "failed": 2}
    table = dagflow_cli("status", cwd=tmp_path).stdout
    assert "hello" in table and "exit code 7" in table

    unknown = dagflow_cli("logs", "one", "helo", cwd=tmp_path)
    assert unknown.returncode == 2 and "did you mean hello" in unknown.stderr


@pytest.mark.slow
def test_bad_input_exits_2_without_a_traceback(tmp_path: Path) -> None:
    gpu = step("gpu", resources=Resources(memory_mb=16, gpus=2))
    plan = write_plan(tmp_path, [node("g", "gpu", "touch ran")], steps=[gpu])
    from dagflow.engines.local.devices import present_devices

    cases = [
        # --gpus naming a device this machine lacks is refused; with GPU 0 present, the plan needs two.
        (["run", str(plan), "--gpus", "0"], "needs 2 GPUs" if "0" in present_devices() else "no GPU 0 on this machine"),
        (["run", str(plan), "--gpus", "zero"], "not a GPU index"),
        (["run", str(plan), "--force", "nope"], "no such step or node"),
        (["run", str(tmp_path / "missing.yaml")], "no such file"),
        (["run", "--resume", "nope"], "no run 'nope'"),
        (["run"], "give a pipeline file"),
        (["run", str(plan), "--run-id", "../escape"], "invalid run id"),
        (["status", "nope"], "no run 'nope'"),
    ]
    for args, message in cases:
        result = dagflow_cli(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert message in result.stderr, (args, result.stderr)
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "ran").exists()
