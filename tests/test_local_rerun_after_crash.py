"""A plain `dagflow run pipeline.yaml` after kill -9 of the runner (what a user types, and what the next
cron firing runs): the killed run's keeper still runs its nodes, so the new command continues that run,
adopting them, instead of starting each a second time beside the first; results the keeper recorded
while no runner lived count; when the keeper or its warden dies too, the other records how its
nodes end; and after both died, their orphaned nodes are stopped before they run again. Each node's
side effect (a line appended under flock when it ends) happens exactly once."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_local_resume_adopt import alive, wait_for
from test_local_support import cli_env, dagflow_cli

from dagflow.run.journal import read_journal

# `long` records each start (its pid), waits for `release`, then appends its side effect under flock.
LONG = (
    "echo $$ >> starts; while [ ! -f release ]; do sleep 0.05; done; "
    "flock effects.lock sh -c 'echo long >> effects'\n"
)
PIPELINE = """\
name: crashy
steps:
  long:
    command: COMMAND
  after:
    needs: [long]
    command: [sh, -c, 'flock effects.lock sh -c "echo after >> effects"']
"""


@pytest.fixture(autouse=True)
def release_at_the_end(tmp_path: Path) -> Iterator[None]:
    """A failed test leaves no `long` waiting for ever (its loop would outlive the test)."""
    yield
    (tmp_path / "release").touch()


def write_pipeline(tmp_path: Path, command: str = "[sh, long.sh]") -> None:
    (tmp_path / "long.sh").write_text(LONG)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("COMMAND", command))


def starts(tmp_path: Path) -> list[int]:
    path = tmp_path / "starts"
    return [int(pid) for pid in path.read_text().split()] if path.exists() else []


def effects(tmp_path: Path) -> list[str]:
    path = tmp_path / "effects"
    return sorted(path.read_text().split()) if path.exists() else []


def runs(tmp_path: Path) -> list[str]:
    root = tmp_path / ".dagflow" / "runs"
    return sorted(entry.name for entry in root.iterdir() if (entry / "plan.json").exists()) if root.exists() else []


def start_run(tmp_path: Path, output: int = subprocess.PIPE) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=output, stderr=output, text=True,
    )


def kill_runner_while_long_runs(tmp_path: Path) -> int:
    runner = start_run(tmp_path, subprocess.DEVNULL)  # its keeper and nodes would hold a pipe open
    wait_for(lambda: len(starts(tmp_path)) == 1)
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=60)
    pid = starts(tmp_path)[0]
    assert alive(pid), "the node outlives its killed runner"
    return pid


def keeper_pid(tmp_path: Path) -> int:
    (run_id,) = runs(tmp_path)
    path = tmp_path / ".dagflow" / "runs" / run_id / "procs.jsonl"
    # the node may start (and say so) before its keeper's line reaches procs.jsonl
    wait_for(lambda: path.exists() and path.read_text().strip())
    return json.loads(path.read_text().splitlines()[0])["k"]


@pytest.mark.slow
def test_a_plain_rerun_adopts_the_node_a_killed_runner_left_running(tmp_path: Path) -> None:
    write_pipeline(tmp_path)
    pid = kill_runner_while_long_runs(tmp_path)
    (run_id,) = runs(tmp_path)
    again = start_run(tmp_path)
    try:
        wait_for(lambda: read_journal(tmp_path / ".dagflow" / "runs" / run_id / "journal.jsonl").runners == 2)
        assert starts(tmp_path) == [pid], "a second copy of long started beside the first"
        (tmp_path / "release").touch()
        out, err = again.communicate(timeout=120)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, out + err
    assert "continuing that run" in err, err
    assert starts(tmp_path) == [pid]
    assert effects(tmp_path) == ["after", "long"]
    assert runs(tmp_path) == [run_id]
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert status["run_id"] == run_id and status["counts"] == {"succeeded": 2}

    third = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)  # a settled run: a new run, all cached
    assert third.returncode == 0, third.stdout + third.stderr
    assert effects(tmp_path) == ["after", "long"]
    assert len(runs(tmp_path)) == 2


@pytest.mark.slow
def test_a_result_the_keeper_recorded_while_no_runner_lived_counts_for_a_plain_rerun(tmp_path: Path) -> None:
    write_pipeline(tmp_path)
    pid = kill_runner_while_long_runs(tmp_path)
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    again = dagflow_cli("run", "pipeline.yaml", "--kill-grace", "0.5", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert starts(tmp_path) == [pid], "long ran again though its keeper recorded its success"
    assert effects(tmp_path) == ["after", "long"]

    cached = dagflow_cli("run", "pipeline.yaml", "--json", cwd=tmp_path)  # and the cache knows it
    assert cached.returncode == 0, cached.stdout + cached.stderr
    assert effects(tmp_path) == ["after", "long"]
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert status["counts"] == {"cached": 2}, status


def parent_of(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2 :].split()[1])


@pytest.mark.parametrize("killed", ["keeper", "warden"])
@pytest.mark.slow
def test_when_a_keeper_process_dies_too_its_node_runs_on_and_its_exit_is_recorded(tmp_path: Path, killed: str) -> None:
    """kill -9 of the runner, then of the node's keeper (its parent) or of the keeper's warden (the pid the
    records name): the other process records the node's exit, so the next run takes it and runs nothing
    twice. (Before the warden, the keeper's death left the exit unknowable: the node was killed and run
    again, and a node that ended in the instant before that kill ran twice.)"""
    write_pipeline(tmp_path)
    pid = kill_runner_while_long_runs(tmp_path)
    warden = keeper_pid(tmp_path)
    keeper = parent_of(pid)
    assert keeper != warden and parent_of(keeper) == warden
    os.kill(keeper if killed == "keeper" else warden, signal.SIGKILL)
    if killed == "keeper":
        wait_for(lambda: parent_of(pid) == warden)  # the warden is the node's subreaper
    assert alive(pid)
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    again = dagflow_cli("run", "pipeline.yaml", "--kill-grace", "0.5", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert starts(tmp_path) == [pid], "long ran again though its end was recorded"
    assert effects(tmp_path) == ["after", "long"]
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert status["counts"] == {"succeeded": 2}, status


def test_when_keeper_and_warden_both_die_the_next_run_stops_the_orphan_and_runs_it_once(tmp_path: Path) -> None:
    write_pipeline(tmp_path)
    pid = kill_runner_while_long_runs(tmp_path)
    warden, keeper = keeper_pid(tmp_path), parent_of(pid)
    os.kill(warden, signal.SIGKILL)
    os.kill(keeper, signal.SIGKILL)
    wait_for(lambda: parent_of(pid) not in (warden, keeper))
    again = start_run(tmp_path)  # nothing can ever record how the orphan ends: it is stopped and run again
    try:
        wait_for(lambda: len(starts(tmp_path)) == 2)
        assert not alive(pid)
        (tmp_path / "release").touch()
        out, err = again.communicate(timeout=120)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, out + err
    assert effects(tmp_path) == ["after", "long"]


def test_a_node_that_cleared_its_environment_is_adopted_by_its_keeper_not_started_again(tmp_path: Path) -> None:
    # exec env -i: the node keeps its pid (and its keeper as parent) but loses DAGFLOW_RUN_ID and DAGFLOW_NODE
    write_pipeline(tmp_path, "[sh, -c, 'exec env -i PATH=/usr/bin:/bin sh long.sh']")
    pid = kill_runner_while_long_runs(tmp_path)
    assert b"DAGFLOW_RUN_ID" not in Path(f"/proc/{pid}/environ").read_bytes()
    (run_id,) = runs(tmp_path)
    again = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "--resume", run_id, "--kill-grace", "0.5"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        wait_for(lambda: read_journal(tmp_path / ".dagflow" / "runs" / run_id / "journal.jsonl").runners == 2)
        (tmp_path / "release").touch()
        out, err = again.communicate(timeout=120)
    finally:
        if again.poll() is None:
            again.kill()
    assert again.returncode == 0, out + err
    assert starts(tmp_path) == [pid], "the node was not recognised and was started again"
    assert effects(tmp_path) == ["after", "long"]


def test_a_plain_run_of_the_nodes_a_live_runner_runs_is_refused(tmp_path: Path) -> None:
    write_pipeline(tmp_path)
    first = start_run(tmp_path)
    try:
        wait_for(lambda: len(starts(tmp_path)) == 1)
        (run_id,) = runs(tmp_path)
        second = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)
        assert second.returncode == 2, second.stdout + second.stderr
        assert f"run {run_id} of " in second.stderr and "is running now" in second.stderr
        assert f"dagflow cancel {run_id}" in second.stderr
        assert "Traceback" not in second.stderr
        (tmp_path / "release").touch()
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, out + err
    assert len(starts(tmp_path)) == 1
    assert effects(tmp_path) == ["after", "long"]


@pytest.mark.slow
def test_status_after_kill_9_shows_what_the_keeper_still_runs_and_what_ended_since(tmp_path: Path) -> None:
    write_pipeline(tmp_path)
    pid = kill_runner_while_long_runs(tmp_path)

    def node_states() -> dict[str, str]:
        status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
        return {node["node"]: node["state"] for node in status["nodes"]}

    assert node_states() == {"long": "running", "after": "pending"}
    text = dagflow_cli("status", cwd=tmp_path).stdout
    assert "its keeper still runs 1 node, 0 ended since" in text and "--resume" in text, text
    (tmp_path / "release").touch()
    wait_for(lambda: not alive(pid))
    wait_for(lambda: node_states()["long"] == "succeeded")  # its keeper recorded the exit
    assert node_states() == {"long": "succeeded", "after": "pending"}


def test_a_lock_the_runner_inherited_ends_with_the_runner_not_with_its_nodes(tmp_path: Path) -> None:
    """A crontab line runs `flock -n LOCK dagflow run`: a node (or a daemon it leaves) holding LOCK would
    outlive a killed runner and silently skip every later firing."""
    write_pipeline(tmp_path)
    lock = tmp_path / "cron.lock"
    runner = subprocess.Popen(
        ["flock", "-n", str(lock), sys.executable, "-m", "dagflow", "run", "pipeline.yaml"],
        cwd=tmp_path, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(lambda: len(starts(tmp_path)) == 1)
    pid = starts(tmp_path)[0]
    held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    (tmp_path / "release").touch()
    assert runner.wait(timeout=120) == 0
    assert str(lock) not in held, held


CHAIN = """\
name: chain
matrix:
  region: [us, br, de]
steps:
  fetch: {command: [sh, step.sh, "fetch.{region}", "0.3"]}
  train: {command: [sh, step.sh, "train.{region}", "0.6"], needs: [fetch]}
  report: {command: [sh, step.sh, report, "0"], needs: [train], over: [region]}
"""
# A node records that it began, works, then appends its side effect (under flock) as its last act.
STEP = 'echo "$1" >> began; sleep "$2"; flock effects.lock sh -c "echo $1 >> effects"\n'


def began(tmp_path: Path) -> int:
    path = tmp_path / "began"
    return len(path.read_text().split()) if path.exists() else 0


def kill_keepers(tmp_path: Path, which: str, spared: set[int]) -> None:
    """kill -9 of every live warden (the "k" of the records) of the latest run, or of each one's keeper,
    leaving the pairs in spared alone; each pair hit is added to spared. A pair must never lose both
    processes: then nothing can record how its node ends, and a node that finished in that window cannot
    be told from one that did not (the documented case where a node runs again)."""
    procs = tmp_path / ".dagflow" / "runs" / runs(tmp_path)[-1] / "procs.jsonl"
    for warden in {json.loads(line).get("k") for line in procs.read_text().splitlines()} - {None} - spared:
        spared.add(warden)
        targets = [warden] if which == "warden" else [int(pid) for pid in children_of(warden)]
        for target in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, signal.SIGKILL)


def children_of(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_plain_reruns_after_kill_9_at_random_moments_run_each_node_once(tmp_path: Path, seed: int) -> None:
    """kill -9 of the runner (and once of its keeper too) at random moments while nodes run, each followed by
    the command a user or cron would type next, until a run ends: every node's side effect happened once."""
    import random
    import time

    pick = random.Random(seed)
    (tmp_path / "pipeline.yaml").write_text(CHAIN)
    (tmp_path / "step.sh").write_text(STEP)
    expected = sorted(["report", *(f"{step}.{region}" for step in ("fetch", "train") for region in ("us", "br", "de"))])
    hit: set[int] = set()  # the keeper pairs one of whose processes was killed
    for attempt in range(3):
        runner = start_run(tmp_path, subprocess.DEVNULL)
        target = began(tmp_path) + 1  # a moment after one more node has begun: mid-run, never before it
        wait_for(lambda: began(tmp_path) >= target or runner.poll() is not None)  # noqa: B023
        time.sleep(pick.uniform(0.0, 0.25))  # within the node that just began (0.3 s or 0.6 s of work)
        if runner.poll() is not None:
            break
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=60)
        if attempt in (1, 2):  # its keeper (the nodes' parent) dies too, then its warden: the other records
            kill_keepers(tmp_path, "keeper" if attempt == 1 else "warden", hit)
    final = dagflow_cli("run", "pipeline.yaml", "--kill-grace", "0.5", cwd=tmp_path)
    assert final.returncode == 0, final.stdout + final.stderr
    assert sorted((tmp_path / "effects").read_text().split()) == expected
