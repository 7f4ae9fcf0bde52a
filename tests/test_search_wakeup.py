"""The scheduler's sleep between rounds ends when a trial's runner ends, not when a poll period has passed.

Every wait below is given a poll period no test would sit out (an hour): a wait that ended, ended on
the event it waits for. The timeouts on joins and commands are safety nets only.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from test_search_scheduler_support import finished_search_rows, search_cli, start_search, wait_for, write_pipeline

from dagflow.search.wakeup import Wakeup

HOUR = 3600.0


def _runner(runs_dir: Path, run_id: str, names_its_run: bool = True) -> tuple[Path, subprocess.Popen[bytes]]:
    """A live process recorded as run_id's runner (runner.pid), whose command line names the run or not."""
    run_dir = runs_dir / run_id
    run_dir.mkdir(parents=True)
    argv = [sys.executable, "-c", "import sys; sys.stdin.read()", *([run_id] if names_its_run else [])]
    process = subprocess.Popen(argv, stdin=subprocess.PIPE)
    (run_dir / "runner.pid").write_text(f"{process.pid}\n")
    return run_dir, process


def _waiting(wakeup: Wakeup, run_dirs: list[Path]) -> threading.Thread:
    thread = threading.Thread(target=wakeup.wait, args=(run_dirs, HOUR), daemon=True)
    thread.start()
    return thread


def test_a_wait_ends_when_a_runner_exits(tmp_path: Path) -> None:
    wakeup = Wakeup()
    first, one = _runner(tmp_path, "s-t1")
    second, two = _runner(tmp_path, "s-t2")
    try:
        thread = _waiting(wakeup, [first, second])
        two.kill()  # before or after the wait took hold of it: either way the wait ends
        thread.join(60)
        assert not thread.is_alive()
    finally:
        for process in (one, two):
            process.kill()
            process.wait()


def test_a_wake_ends_a_wait(tmp_path: Path) -> None:
    wakeup = Wakeup()
    run_dir, process = _runner(tmp_path, "s-t1")
    try:
        thread = _waiting(wakeup, [run_dir])
        wakeup.wake()
        thread.join(60)
        assert not thread.is_alive()
        assert process.poll() is None  # it was the stop that ended it
    finally:
        process.kill()
        process.wait()


def test_a_recorded_pid_that_is_not_the_runner_ends_waits_without_the_poll_period(tmp_path: Path) -> None:
    """A pid another program reused says the runner is gone: the next round looks at once. While its run
    does not read as ended yet, later waits look at it again after a short delay, not a poll period."""
    wakeup = Wakeup()
    run_dir, process = _runner(tmp_path, "s-t1", names_its_run=False)
    try:
        thread = threading.Thread(target=lambda: [wakeup.wait([run_dir], HOUR) for _ in range(3)], daemon=True)
        thread.start()
        thread.join(60)
        assert not thread.is_alive()
        assert process.poll() is None  # the process itself runs on
    finally:
        process.kill()
        process.wait()


def test_each_trial_is_submitted_once_the_one_before_ended_without_a_poll_period(tmp_path: Path) -> None:
    """parallel 1 and a poll period of an hour: the search still runs its budget, each trial created after
    the previous trial's run wrote its end (the journal's finish event), not a poll period later."""
    pipeline = write_pipeline(tmp_path / "p", budget=3, parallel=1)
    result = search_cli("run", str(pipeline), "--poll", str(HOUR), "--seed", "2", cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = finished_search_rows(tmp_path / ".dagflow" / "search.db", pipeline.parent, 3)
    runs = tmp_path / ".dagflow" / "runs"
    for before, after in itertools.pairwise(rows):
        journal = (runs / str(before["run_id"]) / "journal.jsonl").read_text()
        events = [json.loads(line) for line in journal.splitlines()]
        finished = [event["t"] for event in events if event["e"] == "finish"]
        assert finished and float(after["created"]) >= finished[-1] - 0.001  # the journal's t is to the ms


def test_sigterm_stops_a_search_waiting_out_a_long_poll(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=2, parallel=1)
    (pipeline.parent / "sleep.txt").write_text("600")
    scheduler = start_search("run", str(pipeline), "--poll", str(HOUR), cwd=tmp_path)
    try:
        wait_for(lambda: (pipeline.parent / "calls.txt").exists(), timeout=120)
        os.kill(scheduler.pid, signal.SIGTERM)
        out, _ = scheduler.communicate(timeout=120)
    finally:
        scheduler.kill()
    assert scheduler.returncode == 130, out
    assert "stopped with the scheduler" in out and "run the same command again to continue it" in out
