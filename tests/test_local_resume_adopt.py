"""A runner killed with kill -9 while a node runs: the node runs on (its keeper outlives the runner), and
`dagflow run --resume` adopts it while it still runs, or takes its result when it finished meanwhile.
Also: a resume after the pipeline file was fixed runs the fixed command and keeps unchanged nodes, and a node
the edit changed that still runs is rerun, not adopted, by a foreground or a detached runner."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_local_support import cli_env, dagflow_cli, make_plan, node, step

from dagflow.run.journal import read_journal

# Writes its pid to `starts` each time it starts, prints while it waits for `release`, then exits with
# the code in `rc` (0 without it). A node killed and rerun would show two starts.
LONG = (
    'echo $$ >> starts; while [ ! -f release ]; do echo tick; sleep 0.05; done; '
    'exit "$(cat rc 2>/dev/null || echo 0)"'
)


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_dir(tmp_path: Path) -> Path:
    return tmp_path / ".dagflow" / "runs" / "ad"


def starts(tmp_path: Path) -> list[int]:
    path = tmp_path / "starts"
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def start_and_kill_runner(tmp_path: Path) -> int:
    """Start a run of `long` -> `after`, kill -9 its runner while `long` runs; return long's pid."""
    plan = make_plan(
        tmp_path, [step("s")], [node("long", "s", LONG), node("after", "s", "echo x >> after.ran", parents=["long"])],
        run_id="ad",
    )
    (tmp_path / "plan.json").write_text(plan.to_json())
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "plan.json", "--run-id", "ad", "--jobs", "2", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: len(starts(tmp_path)) == 1 and (run_dir(tmp_path) / "logs" / "long.out").exists())
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    pid = starts(tmp_path)[0]
    assert alive(pid), "the node must outlive its killed runner"
    return pid


def resume(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return dagflow_cli("run", "--resume", "ad", "--kill-grace", "0.5", cwd=tmp_path)


@pytest.mark.slow
def test_a_node_still_running_is_adopted_not_killed_nor_restarted(tmp_path: Path) -> None:
    pid = start_and_kill_runner(tmp_path)
    resumed = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "--resume", "ad", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: read_journal(run_dir(tmp_path) / "journal.jsonl").runners == 2)
        ticks = (run_dir(tmp_path) / "logs" / "long.out").read_text().count("tick")
        # it keeps running (and printing: its output does not depend on a live runner) under the new runner
        wait_for(lambda: (run_dir(tmp_path) / "logs" / "long.out").read_text().count("tick") > ticks + 2)
        assert alive(pid) and resumed.poll() is None
        (tmp_path / "release").touch()
        out, err = resumed.communicate(timeout=120)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    assert resumed.returncode == 0, out + err
    assert starts(tmp_path) == [pid], "adopted, so started once"
    assert (tmp_path / "after.ran").read_text().split() == ["x"]
    status = json.loads(dagflow_cli("status", "ad", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "succeeded" and status["counts"] == {"succeeded": 2}


@pytest.mark.slow
def test_a_node_that_succeeded_while_no_runner_lived_is_not_rerun(tmp_path: Path) -> None:
    pid = start_and_kill_runner(tmp_path)
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    resumed = resume(tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert starts(tmp_path) == [pid]
    assert (tmp_path / "after.ran").read_text().split() == ["x"]
    assert read_journal(run_dir(tmp_path) / "journal.jsonl").nodes["long"].state == "succeeded"


@pytest.mark.slow
def test_a_node_that_failed_while_no_runner_lived_keeps_its_exit_code(tmp_path: Path) -> None:
    pid = start_and_kill_runner(tmp_path)
    (tmp_path / "rc").write_text("3\n")
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    resumed = resume(tmp_path)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert "failed long: exit code 3" in resumed.stdout
    assert starts(tmp_path) == [pid], "its result was taken, not a rerun"
    assert not (tmp_path / "after.ran").exists()
    record = read_journal(run_dir(tmp_path) / "journal.jsonl").nodes["long"]
    assert (record.state, record.rc) == ("failed", 3)


@pytest.mark.slow
def test_resume_after_fixing_the_pipeline_runs_the_fixed_command_and_keeps_unchanged_nodes(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    broken = (
        "name: fixme\nsteps:\n"
        "  prep:\n    command: sh -c 'echo prep >> runs.log'\n"
        "  other:\n    command: sh -c 'echo other >> runs.log'\n"
        "  train:\n    needs: [prep]\n    command: sh -c 'echo {word} >> runs.log; test {word} = fixed'\n"
    )
    pipeline.write_text(broken.format(word="fixd"))
    first = dagflow_cli("run", "pipeline.yaml", "--run-id", "fx", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    assert "--resume fx" in first.stdout  # the summary recommends it

    pipeline.write_text(broken.format(word="fixed"))  # the user fixes the typo, then does as told
    resumed = dagflow_cli("run", "--resume", "fx", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "re-planned" in resumed.stderr
    assert sorted((tmp_path / "runs.log").read_text().split()) == ["fixd", "fixed", "other", "prep"]
    status = json.loads(dagflow_cli("status", "fx", "--json", cwd=tmp_path).stdout)
    assert status["counts"] == {"succeeded": 3}

    again = dagflow_cli("run", "--resume", "fx", cwd=tmp_path)  # nothing changed since: nothing reruns
    assert again.returncode == 0 and "re-planned" not in again.stderr
    assert sorted((tmp_path / "runs.log").read_text().split()) == ["fixd", "fixed", "other", "prep"]


@pytest.mark.slow
def test_an_edit_a_resume_takes_is_checked_by_the_engines_as_a_fresh_run_would_be(tmp_path: Path) -> None:
    """The edited file is loaded with every engine's own checks (here HTCondor's parser of `requirements`),
    as `dagflow run` checks a fresh file: a bad expression is a located error, not a silently kept plan."""
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text("name: fixme\nsteps:\n  train:\n    command: sh -c 'exit 1'\n")
    first = dagflow_cli("run", "pipeline.yaml", "--run-id", "fx", cwd=tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    pipeline.write_text("name: fixme\nsteps:\n  train:\n    command: 'true'\n    requirements: 'Memory >= (2'\n")
    fresh = dagflow_cli("validate", "pipeline.yaml", cwd=tmp_path)
    assert fresh.returncode == 2, fresh.stdout + fresh.stderr
    resumed = dagflow_cli("run", "--resume", "fx", cwd=tmp_path)
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert "pipeline.yaml:5" in resumed.stderr and "requirements" in resumed.stderr, resumed.stderr
    assert "Traceback" not in resumed.stderr


def _pid_of(journal: Path, node: str) -> int | None:
    record = read_journal(journal).nodes.get(node)
    return None if record is None else record.pid


EDITED = (
    "name: edited\nsteps:\n"
    "  long:\n    command: sh -c '{command}'\n"
    "  after:\n    needs: [long]\n    command: sh -c 'echo x >> after.ran'\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(
    "continue_with",
    [("run", "--resume", "ad"), ("submit", "--engine", "local", "--resume", "ad"), ("resubmit", "ad")],
    ids=["run", "submit", "resubmit"],
)
def test_a_live_node_the_edit_changed_is_rerun_not_adopted(tmp_path: Path, continue_with: tuple[str, ...]) -> None:
    """An edit is never served from a stale node: a node its keeper still runs after its runner was killed
    is killed and rerun when the pipeline edit changed it, by a foreground or a detached runner alike."""
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(EDITED.format(command="echo $$ >> starts; while [ ! -f release ]; do sleep 0.05; done"))
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--run-id", "ad", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: len(starts(tmp_path)) == 1)
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    stale = starts(tmp_path)[0]
    assert alive(stale), "the node must outlive its killed runner"
    pipeline.write_text(EDITED.format(command="echo new >> runs.log"))
    journal = run_dir(tmp_path) / "journal.jsonl"
    try:
        continued = dagflow_cli(*continue_with, cwd=tmp_path)
        assert continued.returncode == 0, continued.stdout + continued.stderr
        assert "re-planned" in continued.stderr
        # a detached runner ends once `long` ran, or hangs on the stale node it adopted
        # (until the new runner starts it, the journal has no record of `long`: the re-plan forgot it)
        wait_for(lambda: (tmp_path / "runs.log").exists() or _pid_of(journal, "long") == stale)
        assert read_journal(journal).nodes["long"].pid != stale, "the stale node was adopted"
        wait_for(lambda: read_journal(journal).finished is not None)
    finally:
        (tmp_path / "release").touch()
    assert (tmp_path / "runs.log").read_text().split() == ["new"]
    wait_for(lambda: not alive(stale))
    assert starts(tmp_path) == [stale]
    status = json.loads(dagflow_cli("status", "ad", "--json", cwd=tmp_path).stdout)
    assert status["state"] == "succeeded" and status["counts"] == {"succeeded": 2}
