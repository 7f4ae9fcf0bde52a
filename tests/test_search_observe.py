"""How the scheduler reads a trial's run (scheduler_observe.py), against real local runners.

A runner that ends while the scheduler looks at its run must read as ended or running, never as cut short:
the status used to read the journal and then the lock, so a runner that wrote its finish event and released
the lock between the two reads showed a run "stopped" (the journal without its finish, no lock) whose
runner was gone, and the trial failed as vanished. With the scheduler woken by a runner's exit (wakeup.py),
two resumed trials ending together hit that window every time (tests/test_search_full_disk.py).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from local_run import submit_local
from test_local_support import make_plan, node, step

import dagflow.run.status as run_status
from dagflow.engines.local.options import RunOptions
from dagflow.run.layout import RunLayout
from dagflow.run.lock import is_locked
from dagflow.search.scheduler_observe import RUNNING, SUCCEEDED, observe_run, runner_pid


def _ended(pid: int) -> bool:
    """Whether the process is gone or a zombie (a zombie's command line is empty)."""
    try:
        return not Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True


def test_a_runner_that_ends_while_its_run_is_read_does_not_read_as_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, work, go = tmp_path / "runs", tmp_path / "work", tmp_path / "go"
    work.mkdir()
    script = f"touch {tmp_path}/started; while [ ! -e {go} ]; do sleep 0.05; done"
    plan = make_plan(work, [step("a")], [node("a", "a", script)], run_id="s-t1")
    _, run_dir, _ = submit_local(plan, RunOptions(runs_dir=runs))
    layout = RunLayout.from_run_dir(run_dir)
    deadline = time.monotonic() + 300  # a safety net only: each wait is for an event
    while not ((tmp_path / "started").exists() and is_locked(layout.lock_path)):
        assert time.monotonic() < deadline, "the runner did not start its node"
        time.sleep(0.05)
    pid = runner_pid(run_dir)
    assert pid is not None

    real_read = run_status.read_journal

    def read_then_let_the_runner_end(path: Path):  # type: ignore[no-untyped-def]
        journal = real_read(path)
        if not go.exists():  # the first read only: the runner ends right after it
            go.touch()
            while not _ended(pid):
                assert time.monotonic() < deadline, "the runner did not end"
                time.sleep(0.05)
        return journal

    monkeypatch.setattr(run_status, "read_journal", read_then_let_the_runner_end)
    try:
        observed = observe_run(run_dir, time.time(), 120.0)
    finally:
        go.touch()
    assert observed.state in (RUNNING, SUCCEEDED), observed
    monkeypatch.undo()
    assert observe_run(run_dir, time.time(), 120.0).state == SUCCEEDED
