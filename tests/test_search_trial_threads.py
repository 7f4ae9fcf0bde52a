"""Local trials run on threads of the search process (search/trial_threads.py): such a trial's run is live to
`dagflow status` and the live-run rule while it runs, and a kill -9 of the search in any window of a trial's
start leaves nothing lost and nothing run twice: the next scheduler starts a run recorded running that no
runner started, and resumes (adopting its node) one it finds started from a trial still recorded submitting."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from local_run import create_local
from test_local_support import cli_env
from test_search_scheduler_support import (
    calls,
    finished_search_rows,
    search_cli,
    start_search,
    trial_rows,
    wait_for,
    write_pipeline,
)

from dagflow.engines.local import LocalEngine, RunOptions
from dagflow.run.layout import RunLayout
from dagflow.search.ownership import identity, record_owner
from dagflow.search.scheduler import Scheduler, SchedulerOptions
from dagflow.search.store import SearchStore
from dagflow.search.trials import PipelineTrials, config_of, fingerprint
from dagflow.spec import load_spec


def test_a_trial_run_on_the_search_thread_is_live_to_status_and_to_the_live_run_rule(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1)
    (pipeline.parent / "sleep.txt").write_text("600")
    search = start_search("run", str(pipeline), cwd=tmp_path)
    try:
        wait_for(lambda: calls(pipeline.parent) == ["quad-t1"], timeout=300)
        status = subprocess.run(
            [sys.executable, "-m", "dagflow", "status", "quad-t1", "--json"],
            cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert status.returncode == 0, status.stdout + status.stderr
        assert json.loads(status.stdout)["state"] == "running"
        live = LocalEngine(tmp_path / ".dagflow" / "runs").live(RunLayout(tmp_path / ".dagflow" / "runs", "quad-t1"))
        assert live is not None and live.driver == f"runner pid {search.pid}"  # the search process drives it
        assert live.running == {"evaluate"}
        search.send_signal(signal.SIGTERM)
        out, err = search.communicate(timeout=300)
    finally:
        if search.poll() is None:
            search.kill()
    assert search.returncode == 130, out + err
    assert [row["state"] for row in trial_rows(tmp_path / ".dagflow" / "search.db")] == ["cancelled"]


def test_a_trial_recorded_running_whose_run_no_runner_started_is_started_on_restart(tmp_path: Path) -> None:
    """The window between a trial recorded running and its thread's runner taking the run's lock: a kill -9
    there leaves a prepared run that nothing will start (a detached runner would have lived on)."""
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1, optimizer="random")
    runs_dir = tmp_path / ".dagflow" / "runs"
    store = SearchStore(tmp_path / ".dagflow" / "search.db")
    source = PipelineTrials(load_spec(pipeline))
    store.open_search("quad", "pipeline", source.source, fingerprint(source), config_of(source), 3, 1, 1)
    trial = store.add_trial("quad", "", {"x": 0.2, "k": 2, "mode": "a"}, "local", 600)
    create_local(source.plan("", 1, trial.params, trial.run_id), RunOptions(runs_dir=runs_dir))
    assert record_owner(runs_dir / trial.run_id, identity(store.search("quad").uid, trial))  # type: ignore[union-attr]
    store.mark_submitted(trial, str(os.getpid()))
    lines: list[str] = []
    options = SchedulerOptions(runs_dir=runs_dir, poll_s=0.05, seed=3, start_grace_s=0.5)
    assert Scheduler(source, store, options, say=lines.append).run() == 0, lines
    assert [t.state for t in store.trials("quad")] == ["succeeded"], lines
    assert calls(pipeline.parent) == [trial.run_id]
    assert any("[t1] resumed run quad-t1" in line for line in lines), lines


def test_kill_9_while_a_trial_still_recorded_submitting_runs_its_node_then_the_restart_adopts_the_node(
    tmp_path: Path,
) -> None:
    """The window between a trial's thread starting its node and the trial recorded running: the restart
    finds the run started, adopts it, and resumes it, whose runner adopts the node its keeper still runs."""
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1)
    (pipeline.parent / "sleep.txt").write_text("3")
    db = tmp_path / ".dagflow" / "search.db"
    search = start_search("run", str(pipeline), "--poll", "0.05", "--seed", "4", cwd=tmp_path)
    wait_for(lambda: calls(pipeline.parent) == ["quad-t1"], timeout=300)
    os.kill(search.pid, signal.SIGKILL)
    search.communicate()
    with sqlite3.connect(db, timeout=60) as connection:  # as if the kill had come before it was marked running
        connection.execute("UPDATE trials SET state = 'submitting', handle = NULL, submitted = NULL")
    result = search_cli("run", str(pipeline), "--poll", "0.05", cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "[t1] adopted run quad-t1" in result.stdout and "[t1] resumed run quad-t1" in result.stdout
    finished_search_rows(db, pipeline.parent, 1)  # its objective ran once: the node was adopted, not rerun


def test_a_stop_asked_after_the_runner_ended_writes_into_no_file_that_took_its_descriptor(tmp_path: Path) -> None:
    """TrialThreads may ask a runner to stop in the instant after it closed its wake pipe: the pipe's descriptor
    numbers are free by then, and the next file opened (another trial's journal) takes one. Before the fix, the
    request wrote its wake byte into that file."""
    from dagflow.engines.local.engine import launch_here
    from dagflow.plan.expand import expand
    from dagflow.run.reporting import Reporter
    from dagflow.run.session import RunSession

    (tmp_path / "p.yaml").write_text("name: p\nsteps:\n  a: {command: 'true'}\n")
    plan = expand(load_spec(tmp_path / "p.yaml"))
    engine = LocalEngine(tmp_path / "runs")
    engine.run_options = RunOptions(runs_dir=tmp_path / "runs")
    layout, work = RunSession(engine, lambda _layout: None, lambda *_: None).create(plan, tmp_path / "runs")
    runner = launch_here(engine, layout, work, Reporter())
    wake_fds = {runner._wake_r, runner._wake_w}
    assert runner.run().ok
    opened = []
    try:
        while not wake_fds <= {fd for fd, _ in opened} and len(opened) < 256:
            path = tmp_path / f"other-{len(opened)}"
            opened.append((os.open(path, os.O_RDWR | os.O_CREAT), path))
        assert wake_fds <= {fd for fd, _ in opened}, "the pipe's descriptors were not reused"
        runner.request_stop()
    finally:
        for fd, _ in opened:
            os.close(fd)
    assert all(path.read_bytes() == b"" for _, path in opened)
