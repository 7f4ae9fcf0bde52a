"""Nodes run in the plan's workdir while the runner's own working directory stays where it was: the
keeper moves into the workdir, not the runner, so a program can embed a run in a thread."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import make_plan, node, step

from dagflow.engines.local import RunOptions
from dagflow.run.result import RunResult


def wait_until(condition: object, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_run_in_a_thread_leaves_the_programs_directory_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    monkeypatch.chdir(home)
    # Relative names, as a node's command uses them: `where` and `release` are in the workdir.
    script = "pwd -P > where; echo hello; while [ ! -f release ]; do sleep 0.02; done"
    plan = make_plan(work, [step("s")], [node("a", "s", script)])
    results: list[RunResult] = []
    # runs_dir relative to the program's directory, which the runner resolves before the keeper moves away.
    runner = threading.Thread(target=lambda: results.append(run_local(plan, RunOptions(runs_dir=Path("runs")))))
    runner.start()
    try:
        wait_until((work / "where").exists)
        for _ in range(5):  # while the node runs
            assert os.getcwd() == str(home)
            time.sleep(0.02)
    finally:
        (work / "release").touch()
        runner.join(timeout=60)
    assert not runner.is_alive()
    assert results and results[0].ok, results
    assert os.getcwd() == str(home)
    assert (work / "where").read_text().strip() == os.path.realpath(work)
    run_dir = home / "runs" / "r1"
    assert (run_dir / "logs" / "a.out").read_text() == "hello\n"
    assert '"rc":0' in (run_dir / "procs.jsonl").read_text()


def test_programs_are_found_relative_to_the_workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    (work / "bin").mkdir(parents=True)
    tool = work / "bin" / "tool"
    tool.write_text('#!/bin/sh\necho "$DAGFLOW_NODE" >> ran\n')
    tool.chmod(0o755)
    monkeypatch.chdir(home)  # which has no bin/tool
    nodes = [
        node("by_path", "s", "", env={"PATH": f"bin{os.pathsep}{os.defpath}"}),  # a relative PATH entry
        node("by_name", "s", ""),  # a relative path to the program itself
    ]
    nodes[0].argv[:] = ["tool"]
    nodes[1].argv[:] = ["bin/tool"]
    plan = make_plan(work, [step("s")], nodes)
    result = run_local(plan, RunOptions(runs_dir=tmp_path / "runs", jobs=1))
    assert result.ok, result.failures
    assert sorted((work / "ran").read_text().split()) == ["by_name", "by_path"]
