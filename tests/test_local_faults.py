"""Faults under the run directory: a full disk stops the runner cleanly and a later resume works; a
malformed journal event is skipped (and reported once), never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import dagflow_cli, make_plan, node, step

from dagflow.engines.local import RunOptions
from dagflow.run.journal import read_journal


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 1 MiB filesystem (tmpfs), mounted for the test; skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.slow
def test_a_full_disk_stops_the_runner_cleanly_and_a_resume_finishes(tmp_path: Path, small_disk: Path) -> None:
    runs = small_disk / "runs"
    # `fill` fills the run's filesystem (once); the events of the nodes after it no longer fit.
    fill = f"test -f filled && exit 0; touch filled; cat /dev/zero > {small_disk}/filler 2>/dev/null; exit 0"
    nodes = [node("fill", "s", fill)]
    nodes += [node(f"n{i}", "s", "echo $DAGFLOW_NODE >> ran.log", parents=["fill"]) for i in range(150)]
    plan = make_plan(tmp_path, [step("s")], nodes, run_id="full")
    (tmp_path / "plan.json").write_text(plan.to_json())

    stopped = dagflow_cli("run", "plan.json", "--run-id", "full", "--runs-dir", str(runs), "--no-cache", cwd=tmp_path)
    assert stopped.returncode != 0, stopped.stdout + stopped.stderr
    assert "Traceback" not in stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "--resume full" in errors[0], errors
    journal_path = runs / "full" / "journal.jsonl"
    assert journal_path.read_bytes().endswith(b"\n"), "no torn last line"
    state = read_journal(journal_path)
    assert state.skipped_lines == 0 and state.bad_lines == 0

    (small_disk / "filler").unlink()
    resumed = dagflow_cli("run", "--resume", "full", "--runs-dir", str(runs), "--no-cache", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    status = json.loads(dagflow_cli("status", "full", "--runs-dir", str(runs), "--json", cwd=tmp_path).stdout)
    assert status["counts"] == {"succeeded": 151}
    ran = (tmp_path / "ran.log").read_text().split()
    assert sorted(set(ran)) == sorted(f"n{i}" for i in range(150))


@pytest.mark.slow
def test_a_malformed_journal_event_is_skipped_and_reported_once(tmp_path: Path) -> None:
    s = step("s")
    plan = make_plan(
        tmp_path, [s], [node("a", "s", "echo a >> ran.log"), node("b", "s", "echo b >> ran.log; test -f ok")]
    )
    runs = tmp_path / ".dagflow" / "runs"
    first = run_local(plan, RunOptions(runs_dir=runs, jobs=2))
    assert first.states == {"a": "succeeded", "b": "failed"}
    malformed = [
        {"e": "end", "n": "b"},  # no state
        {"e": "start"},  # no node
        {"e": "end", "n": "b", "s": "succeeded", "rc": "zero"},  # a mistyped field
        {"e": "upstream_failed", "n": "ab", "by": "a"},  # not a list
        {"e": "start", "n": "a", "a": 1, "pid": "12"},
        ["not", "an", "event"],
        {"e": "what"},
    ]
    with open(runs / "r1" / "journal.jsonl", "a") as journal:
        journal.writelines(json.dumps(event) + "\n" for event in malformed)

    state = read_journal(runs / "r1" / "journal.jsonl")
    assert state.bad_lines == len(malformed)
    assert state.nodes["a"].state == "succeeded" and state.nodes["b"].state == "failed"

    status = dagflow_cli("status", "r1", "--json", cwd=tmp_path)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr
    assert json.loads(status.stdout)["counts"] == {"succeeded": 1, "failed": 1}
    table = dagflow_cli("status", "r1", cwd=tmp_path)
    assert table.returncode == 0 and table.stdout.count("skipped 7 malformed line(s)") == 1, table.stdout

    (tmp_path / "ok").touch()
    resumed = dagflow_cli("run", "--resume", "r1", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "Traceback" not in resumed.stderr and resumed.stderr.count("skipped 7 malformed line(s)") == 1
    assert sorted((tmp_path / "ran.log").read_text().split()) == ["a", "b", "b"]
