"""The search scheduler on the local engine, with real trial processes: budget, parallel trials,
failed and vanished trials, deadlines, per-region searches side by side, kill -9 and restart, and
the crash windows of submission (a trial recorded but not submitted, prepared but not started)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import sqlite3
import threading
from collections import Counter
from pathlib import Path

import pytest
from local_run import create_local, run_local
from test_local_support import dagflow_cli
from test_search_scheduler_support import (
    calls,
    finished_search_rows,
    kill_9_search_when,
    search_cli,
    start_search,
    trial_rows,
    wait_for,
    write_pipeline,
)

from dagflow.engines.local import RunOptions
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.lock import is_locked
from dagflow.search import Observation, make_optimizer
from dagflow.search.ownership import identity, record_owner
from dagflow.search.scheduler import Scheduler, SchedulerOptions, SearchBusyError
from dagflow.search.store import SearchStore
from dagflow.search.trials import PipelineTrials, config_of, fingerprint
from dagflow.spec import load_spec


def scheduler_for(tmp_path: Path, pipeline: Path, lines: list[str], **options: object) -> tuple[Scheduler, SearchStore]:
    store = SearchStore(tmp_path / ".dagflow" / "search.db")
    settings = SchedulerOptions(runs_dir=tmp_path / ".dagflow" / "runs", poll_s=0.05, seed=3, **options)  # type: ignore[arg-type]
    return Scheduler(PipelineTrials(load_spec(pipeline)), store, settings, say=lines.append), store


@pytest.mark.slow
def test_search_runs_to_its_budget_with_parallel_trials(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=5, parallel=2)
    result = search_cli("run", str(pipeline), "--poll", "0.05", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # one objective invocation per trial, by the trial's own run
    rows = finished_search_rows(tmp_path / ".dagflow" / "search.db", pipeline.parent, 5)
    assert [row["run_id"] for row in rows] == [f"quad-t{n}" for n in range(1, 6)]
    for row in rows:  # each trial ran its own params and reported their objective
        params = row["params"]
        expected = (params["x"] - 0.3) ** 2 + 0.1 * params["k"] + (0.5 if params["mode"] == "b" else 0.0)
        assert row["value"] == pytest.approx(expected)
        assert row["handle"] and row["handle"].isdigit()  # the local engine's runner pid
    # one progress line per trial event
    out = result.stdout
    assert out.count("] submitted ") == 5 and out.count("] succeeded loss=") == 5
    assert "done: best loss=" in out
    # the step that uses no searched param came from the cache for later trials. Not "once per trial slot":
    # a trial that starts after another's setup rewrote base.txt and before that runner recorded its cache
    # entry finds the earlier entry's product changed (a miss, by the cache's rule) and runs setup again
    assert len((pipeline.parent / "setup-calls.txt").read_text().split()) < 5
    # the scheduler limits threads inside itself only: trials see the environment they were given
    metrics = json.loads((pipeline.parent / "out" / "quad-t5" / "metrics.json").read_text())
    assert metrics["omp"] == os.environ.get("OMP_NUM_THREADS")


def _overdue_once_it_hangs(pipeline_dir: Path, db: Path, stop: threading.Event, errors: list[BaseException]) -> None:
    """When the trial that hangs is running, set its deadline back to its creation time, as if its time had
    run out: the scheduler finds it overdue at its next poll. Every other trial keeps the default deadline
    (days), so no trial races a wall-clock limit on a loaded machine."""
    try:
        while not (hung := list(pipeline_dir.glob("hang-once.*"))):
            assert not stop.wait(0.05), "the search ended before a trial hung"
        pid = hung[0].name.rsplit(".", 1)[1]
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        run_id = next(item.split(b"=", 1)[1] for item in environ if item.startswith(b"DAGFLOW_RUN_ID=")).decode()
        connection = sqlite3.connect(db, timeout=60)
        try:
            with connection:
                changed = connection.execute("UPDATE trials SET deadline = created WHERE run_id = ?", (run_id,))
            assert changed.rowcount == 1, run_id
        finally:
            connection.close()
    except BaseException as error:  # handed to the test, which runs the scheduler in the main thread
        errors.append(error)


@pytest.mark.slow
def test_failed_vanished_and_overdue_trials_count_and_the_search_goes_on(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=6, parallel=3, optimizer="random")
    for trigger in ("fail-once", "vanish-once", "hang-once"):
        (pipeline.parent / trigger).touch()
    lines: list[str] = []
    scheduler, store = scheduler_for(tmp_path, pipeline, lines)
    stop, errors = threading.Event(), []  # type: ignore[var-annotated]
    expire = threading.Thread(target=_overdue_once_it_hangs, args=(pipeline.parent, store.path, stop, errors))
    expire.start()
    try:
        assert scheduler.run() == 0
    finally:
        stop.set()
        expire.join()
    assert not errors, errors
    trials = store.trials("quad")
    assert len(trials) == 6  # failures counted against the budget of 6
    assert Counter(trial.state for trial in trials) == Counter(failed=3, succeeded=3), lines
    errors = sorted(trial.error or "" for trial in trials if trial.state == "failed")
    assert errors[0].startswith("deadline: ")
    assert errors[1].startswith("evaluate ") and errors[1].endswith("failing on purpose")  # its stderr
    assert errors[2].startswith("vanished: its runner stopped without finishing")
    assert sum("failed:" in line for line in lines) == 3
    # the failed points were given to the optimiser: no later trial repeats one of them
    assert len({json.dumps(trial.params, sort_keys=True) for trial in trials}) == 6


@pytest.mark.slow
def test_per_region_searches_run_side_by_side(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=3, parallel=2, regions=["a", "b"], optimizer="random")
    lines: list[str] = []
    scheduler, store = scheduler_for(tmp_path, pipeline, lines)
    assert scheduler.run() == 0
    trials = store.trials("quad")
    assert sorted(trial.run_id for trial in trials) == sorted(
        f"quad-t{n}-{region}" for n in (1, 2, 3) for region in ("a", "b")
    )
    assert all(trial.state == "succeeded" for trial in trials)
    assert all(trial.value is not None and (trial.value >= 10) == (trial.region == "b") for trial in trials)
    # a region's trial is that region's sub-DAG plus the shared, region-less setup it needs
    plan = Plan.from_json((tmp_path / ".dagflow" / "runs" / "quad-t1-a" / "plan.json").read_text())
    assert sorted(plan.nodes) == ["evaluate.a", "setup"]
    assert all(node.trial == 1 for node in plan.nodes.values())
    # both regions had trials in flight at once: the first four submissions come before any result
    events = [line.split("] ")[1].split()[0] for line in lines if line.startswith("[t")]
    assert events[:4] == ["submitted"] * 4
    assert sum("done: best loss=" in line for line in lines) == 2


@pytest.mark.slow
def test_kill_9_of_the_scheduler_then_restart_loses_and_repeats_no_trial(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=8, parallel=2)
    (pipeline.parent / "sleep.txt").write_text("0.3")
    db = tmp_path / ".dagflow" / "search.db"
    args = ("run", str(pipeline), "--poll", "0.05", "--seed", "5")
    for finished_before_kill in (2, 5):
        kill_9_search_when(
            lambda n=finished_before_kill: sum(r["state"] == "succeeded" for r in trial_rows(db)) >= n,
            *args,
            cwd=tmp_path,
        )
    result = search_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # every trial's objective ran exactly once: none lost, none submitted twice
    rows = finished_search_rows(db, pipeline.parent, 8)
    assert [str(row["run_id"]) for row in rows] == [f"quad-t{n}" for n in range(1, 9)]


@pytest.mark.slow
def test_ctrl_c_cancels_the_running_trials_and_a_rerun_continues(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=3, parallel=2, optimizer="random")
    (pipeline.parent / "sleep.txt").write_text("60")
    db = tmp_path / ".dagflow" / "search.db"
    scheduler = start_search("run", str(pipeline), "--poll", "0.05", cwd=tmp_path)
    wait_for(lambda: len(calls(pipeline.parent)) == 2)  # both trials' objectives are running
    second = search_cli("run", str(pipeline), cwd=tmp_path)
    assert second.returncode == 2 and f"being run by another scheduler (pid {scheduler.pid})" in second.stderr
    scheduler.send_signal(signal.SIGINT)
    out, _ = scheduler.communicate(timeout=30)
    assert scheduler.returncode == 130
    assert "stopped; run the same command again to continue it" in out
    rows = trial_rows(db)
    assert [row["state"] for row in rows] == ["cancelled", "cancelled"]
    runs = tmp_path / ".dagflow" / "runs"
    wait_for(lambda: not any(is_locked(runs / str(row["run_id"]) / "runner.lock") for row in rows))
    (pipeline.parent / "sleep.txt").unlink()
    result = search_cli("run", str(pipeline), "--poll", "0.05", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    states = [row["state"] for row in trial_rows(db)]
    assert states == ["cancelled", "cancelled", "succeeded", "succeeded", "succeeded"]  # cancelled: not counted


@pytest.mark.slow
def test_cancel_of_one_trials_run_stops_that_trial_and_the_search_goes_on(tmp_path: Path) -> None:
    """A trial's runner is a thread of the search process: `dagflow cancel` of its run stops that trial alone
    (through the run's stop channel), not the search and its other trials, as a signal to its pid would."""
    pipeline = write_pipeline(tmp_path / "p", budget=4, parallel=2, optimizer="random")
    (pipeline.parent / "sleep.txt").write_text("60")
    db = tmp_path / ".dagflow" / "search.db"
    runs = tmp_path / ".dagflow" / "runs"
    scheduler = start_search("run", str(pipeline), "--poll", "0.05", cwd=tmp_path)
    try:
        wait_for(lambda: len(calls(pipeline.parent)) == 2)  # both trials' objectives are running
        first = str(trial_rows(db)[0]["run_id"])
        cancelled = dagflow_cli("cancel", first, "--runs-dir", str(runs), cwd=tmp_path)
        assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
        wait_for(lambda: trial_rows(db)[0]["state"] not in ("running", "submitting"))
        wait_for(lambda: len(calls(pipeline.parent)) == 3)  # the search went on: a third trial started
        assert scheduler.poll() is None, "the search stopped with its trial"
        states = [row["state"] for row in trial_rows(db)]
        assert states == ["failed", "running", "running"], states
        assert not (runs / first / "stop.fifo").exists()
        scheduler.send_signal(signal.SIGINT)
        out, err = scheduler.communicate(timeout=120)
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
    assert scheduler.returncode == 130, out + err
    assert "[t1] failed: run interrupted" in out, out  # as a detached trial runner stopped by a signal


def test_restart_submits_recorded_trials_exactly_once_and_adopts_started_ones(tmp_path: Path) -> None:
    """The crash windows of one submission, set up by hand: a row committed but never submitted, a
    run prepared but never started, and a run that finished while no scheduler was watching."""
    pipeline = write_pipeline(tmp_path / "p", budget=3, parallel=3, optimizer="random")
    store = SearchStore(tmp_path / ".dagflow" / "search.db")
    source = PipelineTrials(load_spec(pipeline))
    lines: list[str] = []
    scheduler, _ = scheduler_for(tmp_path, pipeline, lines)
    runs_dir = tmp_path / ".dagflow" / "runs"

    store.open_search("quad", "pipeline", source.source, fingerprint(source), config_of(source), 3, 3, 3)
    store.add_trial("quad", "", {"x": 0.1, "k": 1, "mode": "a"}, "local", 60)
    prepared = store.add_trial("quad", "", {"x": 0.2, "k": 2, "mode": "a"}, "local", 60)
    finished = store.add_trial("quad", "", {"x": 0.3, "k": 3, "mode": "b"}, "local", 60)
    create_local(source.plan("", 2, prepared.params, prepared.run_id), RunOptions(runs_dir=runs_dir))
    done = run_local(source.plan("", 3, finished.params, finished.run_id), RunOptions(runs_dir=runs_dir))
    assert done.ok
    uid = store.search("quad").uid  # type: ignore[union-attr]
    for trial in (prepared, finished):  # what the scheduler writes right after preparing a trial's run
        assert record_owner(runs_dir / trial.run_id, identity(uid, trial))

    other_engine, _ = scheduler_for(tmp_path, pipeline, lines, engine="slurm")
    with pytest.raises(SearchBusyError, match="continue it with --engine local"):
        other_engine.run()  # in-flight trials are watched and cancelled by the engine that runs them
    assert scheduler.run() == 0
    trials = {trial.run_id: trial for trial in store.trials("quad")}
    assert len(trials) == 3 and all(trial.state == "succeeded" for trial in trials.values())
    assert trials[finished.run_id].value == pytest.approx(0.0 + 0.3 + 0.5)
    assert sorted(calls(pipeline.parent)) == sorted(trials)  # each objective ran once
    assert any("[t1] resubmitted x=0.1" in line for line in lines)
    assert any("[t2] started x=0.2" in line for line in lines)
    assert any(f"[t3] adopted run {finished.run_id}" in line for line in lines)


def test_trial_plans_override_only_the_steps_that_use_the_searched_params(tmp_path: Path) -> None:
    spec = load_spec(write_pipeline(tmp_path / "p"))
    plain = expand(spec, run_id="quad-t1")
    trial = expand(spec, run_id="quad-t1", params={"x": 0.25, "k": 2, "mode": "b"}, trial=1)
    assert trial.nodes["evaluate"].params == {"x": 0.25, "k": 2, "mode": "b"}
    assert "0.25" in trial.nodes["evaluate"].argv and "--k" in trial.nodes["evaluate"].argv
    # setup uses no searched param: same fingerprint as in a plain run, so the cache serves every trial
    assert trial.node_fingerprint(trial.nodes["setup"]) == plain.node_fingerprint(plain.nodes["setup"])
    assert trial.nodes["setup"].trial == 1 and plain.nodes["setup"].trial is None
    assert plain.nodes["evaluate"].params == {"x": 0.0, "k": 1, "mode": "a"}


@pytest.mark.slow
def test_batch_mode_chooses_each_batch_knowing_every_earlier_result_even_across_a_kill_9(tmp_path: Path) -> None:
    """--batch: no trial of a region is created while another is in flight, and each batch is the
    optimiser's whole-batch suggestion from every earlier result, as an in-process batch loop makes it;
    a scheduler killed mid-batch and restarted waits for that batch before it chooses the next."""
    pipeline = write_pipeline(tmp_path / "p", budget=8, parallel=3)
    (pipeline.parent / "sleep.txt").write_text("0.3")
    db = tmp_path / ".dagflow" / "search.db"
    args = ("run", str(pipeline), "--poll", "0.05", "--seed", "7", "--batch")
    # killed once the second batch is recorded, and being submitted or running
    kill_9_search_when(lambda: len(trial_rows(db)) >= 4, *args, cwd=tmp_path)
    result = search_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parallel 3 (synchronous batches)" in result.stdout
    rows = finished_search_rows(db, pipeline.parent, 8)
    batches = [rows[0:3], rows[3:6], rows[6:8]]
    for earlier, later in itertools.pairwise(batches):
        last_result = max(float(row["finished"]) for row in earlier)  # type: ignore[arg-type]
        assert all(float(row["created"]) >= last_result for row in later), (earlier, later)  # type: ignore[arg-type]
    space = PipelineTrials(load_spec(pipeline)).space
    optimizer = make_optimizer(space, "gp", seed=7, budget=8)  # the scheduler's optimiser knows the budget
    observations: list[Observation] = []
    for batch in batches:
        expected = optimizer.suggest(len(batch), observations, [])
        for row, point in zip(batch, expected, strict=True):
            params = row["params"]
            assert isinstance(params, dict)
            assert (params["k"], params["mode"]) == (point["k"], point["mode"])
            assert params["x"] == pytest.approx(point["x"], rel=1e-9, abs=1e-12)
        observations += [Observation(row["params"], row["loss"]) for row in batch]  # type: ignore[arg-type]


@pytest.mark.slow
def test_serial_tail_starts_each_last_trial_once_every_other_has_ended_even_across_a_kill_9(tmp_path: Path) -> None:
    """serial_tail: 2 with parallel 3: the first 4 trials run 3 at a time, then trial 5 is created only
    once trials 1-4 have ended and trial 6 once trial 5 has; a scheduler killed in the tail and
    restarted keeps to it (the rule reads only the database)."""
    pipeline = write_pipeline(tmp_path / "p", budget=6, parallel=3)
    pipeline.write_text(pipeline.read_text() + "  serial_tail: 2\n")
    (pipeline.parent / "sleep.txt").write_text("0.3")
    db = tmp_path / ".dagflow" / "search.db"
    args = ("run", str(pipeline), "--poll", "0.05", "--seed", "5")
    # killed once trial 5, the tail's first, is recorded (and in flight or done)
    kill_9_search_when(lambda: len(trial_rows(db)) >= 5, *args, cwd=tmp_path)
    result = search_cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parallel 3, the last 2 one at a time" in result.stdout
    rows = finished_search_rows(db, pipeline.parent, 6)
    created = [float(row["created"]) for row in rows]  # type: ignore[arg-type]
    finished = [float(row["finished"]) for row in rows]  # type: ignore[arg-type]
    assert created[1] < finished[0] and created[2] < finished[0]  # before the tail: 3 at a time
    assert created[4] >= max(finished[:4]), rows
    assert created[5] >= finished[4], rows


@pytest.mark.slow
def test_serial_tail_after_synchronous_batches_per_region(tmp_path: Path) -> None:
    """--batch with a tail, per region: batches of at most `parallel` up to the tail (the last batch cut
    short where the tail begins), then one trial at a time; each region's tail waits for its own trials only."""
    pipeline = write_pipeline(tmp_path / "p", budget=5, parallel=2, regions=["a", "b"])
    (pipeline.parent / "sleep.txt").write_text("0.2")
    args = ("--poll", "0.05", "--seed", "4", "--batch", "--serial-tail", "2")
    result = search_cli("run", str(pipeline), *args, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "parallel 2 (synchronous batches), the last 2 one at a time" in result.stdout
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    for region in ("a", "b"):
        mine = sorted((row for row in rows if row["region"] == region), key=lambda row: int(row["number"]))  # type: ignore[call-overload]
        assert [row["state"] for row in mine] == ["succeeded"] * 5, mine
        created = [float(row["created"]) for row in mine]  # type: ignore[arg-type]
        finished = [float(row["finished"]) for row in mine]  # type: ignore[arg-type]
        assert created[1] < finished[0]  # the first batch: 2 at once
        for later in (2, 3, 4):  # a batch of 1 (the tail begins after it), then the tail's 2
            assert created[later] >= max(finished[:later]), (region, mine)


def test_serial_tail_comes_from_the_search_block_and_the_command_line_overrides_it(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=4)
    pipeline.write_text(pipeline.read_text() + "  serial_tail: 9\n")
    lines: list[str] = []
    scheduler, store = scheduler_for(tmp_path, pipeline, lines)
    assert scheduler.serial_tail == 4  # never more than the budget: the whole search one at a time
    store.close()
    scheduler, store = scheduler_for(tmp_path, pipeline, lines, serial_tail=0)
    assert scheduler.serial_tail == 0
    store.close()
    assert PipelineTrials(load_spec(write_pipeline(tmp_path / "q"))).serial_tail == 0


def test_batch_comes_from_the_search_block_and_the_command_line_overrides_it(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p")
    pipeline.write_text(pipeline.read_text() + "  batch: true\n")
    assert PipelineTrials(load_spec(pipeline)).batch is True
    lines: list[str] = []
    scheduler, store = scheduler_for(tmp_path, pipeline, lines)
    assert scheduler.batch is True
    store.close()
    scheduler, store = scheduler_for(tmp_path, pipeline, lines, batch=False)
    assert scheduler.batch is False
    store.close()
    assert PipelineTrials(load_spec(write_pipeline(tmp_path / "q"))).batch is False
