"""Early stopping on the local engine with a real training script that reports one JSON line per epoch.

train.py's loss curve is 1/epoch for a good trial and 5 + 1/epoch for a bad one (x > 0.6); every
epoch it appends to its metrics file (with dagflow.search.progress.report) and to epochs.txt beside it,
so the test counts the epochs each trial really ran. Also: the rules on hand-made curves, the
incremental reader, the spec checks, and kill -9 of the scheduler between deciding a stop and cancelling.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_search_scheduler_support import calls, search_cli, trial_rows, wait_for

from dagflow.search.early_stopping import AshaRule, MedianRule
from dagflow.search.progress import ProgressReader, mean_curve, report
from dagflow.search.scheduler import STOP_PAUSE_ENV, _observations
from dagflow.search.store import SearchStore
from dagflow.search.trials import read_metric

EPOCHS = 8

TRAIN = r'''
import argparse, json, os, time
from pathlib import Path

from dagflow.search.progress import report

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
parser.add_argument("--run", required=True)
parser.add_argument("--out", type=Path, required=True)
parser.add_argument("--epochs", type=int, required=True)
args = parser.parse_args()

fd = os.open("calls.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, f"{args.run}\n".encode())
os.close(fd)
base = 5.0 if args.x > 0.6 else 0.0
pause = float(Path("epoch.txt").read_text()) if os.path.exists("epoch.txt") else 0.3
waits_at = int(Path("hopeless-waits.txt").read_text()) if os.path.exists("hopeless-waits.txt") else 0
args.out.parent.mkdir(parents=True, exist_ok=True)
for epoch in range(1, args.epochs + 1):
    time.sleep(pause)
    with open(args.out.parent / "epochs.txt", "a") as handle:
        handle.write(f"{epoch}\n")
    report(args.out, epoch, loss=base + 1.0 / epoch)
    if base and epoch == waits_at:
        time.sleep(600)  # only the early stop ends it
with open(args.out, "a") as handle:
    handle.write(json.dumps({"loss": base + 1.0 / args.epochs + 0.01 * args.x}) + "\n")
'''


def write_training(directory: Path, *, budget: int, parallel: int, rule: str, extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "train.py").write_text(TRAIN)
    metrics = "out/{run.id}/metrics.jsonl"
    path = directory / "pipeline.yaml"
    path.write_text(f"""name: curves
params: {{x: 0.5}}
steps:
  train:
    kind: train
    command: python train.py --x {{params.x}} --run {{run.id}} --out {metrics} --epochs {EPOCHS}
    metrics: {metrics}
search:
  objective: {{metric: loss, goal: minimize}}
  variables:
    x: {{type: FLOAT, min: 0, max: 1}}
  budget: {budget}
  parallel: {parallel}
  optimizer: random
  early_stopping: {{rule: {rule}, min_steps: 2, min_trials: 2{extra}}}
""")
    return path


def bad(row: dict[str, object]) -> bool:
    return float(row["params"]["x"]) > 0.6  # type: ignore[index]


def epochs_ran(directory: Path, run_id: str) -> int:
    path = directory / "out" / run_id / "epochs.txt"
    return len(path.read_text().split()) if path.exists() else 0


def decided_bad(rows: list[dict[str, object]], row: dict[str, object]) -> bool:
    """A bad trial the median rule must stop: when it was submitted, at least 2 trials had ended and more
    good ones than bad ones (all of them report every step up to min_steps, so the median is good)."""
    before = [r for r in rows if r["finished"] is not None and float(r["finished"]) < float(row["submitted"])]  # type: ignore[arg-type]
    good = sum(not bad(r) for r in before)
    return len(before) >= 2 and good > len(before) - good


def check_outcome(directory: Path, rows: list[dict[str, object]], out: str) -> None:
    for row in rows:
        ran = epochs_ran(directory, str(row["run_id"]))
        if not bad(row):  # a good curve is never worse than the others: it runs to its end
            assert row["state"] == "succeeded" and ran == EPOCHS, (row, out)
        if row["state"] == "stopped":
            assert bad(row) and 2 <= int(row["step"]) < EPOCHS, (row, out)  # type: ignore[call-overload]
            assert row["value"] == pytest.approx(5.0 + 1.0 / int(row["step"]))  # type: ignore[call-overload]
            assert row["loss"] == row["value"]
    best = min((r for r in rows if r["state"] == "succeeded"), key=lambda r: float(r["value"]))  # type: ignore[arg-type]
    assert f"best loss={float(best['value']):.6g} at t{best['number']}" in out  # type: ignore[arg-type]


@pytest.mark.slow
def test_median_rule_stops_bad_trials_before_their_last_epoch(tmp_path: Path) -> None:
    pipeline = write_training(tmp_path / "p", budget=10, parallel=2, rule="median")
    result = search_cli("run", str(pipeline), "--poll", "0.05", "--seed", "2", cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert len(rows) == 10 and {row["state"] for row in rows} <= {"succeeded", "stopped"}, rows
    must_stop = [row for row in rows if bad(row) and decided_bad(rows, row)]
    assert len(must_stop) >= 2, rows  # seed 2 draws five good trials, then bad ones among good ones
    for row in must_stop:
        assert row["state"] == "stopped", (row, result.stdout)
        assert epochs_ran(pipeline.parent, str(row["run_id"])) < EPOCHS, row
    check_outcome(pipeline.parent, rows, result.stdout)
    assert result.stdout.count("] stopped at step ") == sum(row["state"] == "stopped" for row in rows)
    status = search_cli("status", "curves", "--json", "--no-plot", cwd=tmp_path)
    trials = json.loads(status.stdout)["trials"]
    assert [t["state"] for t in trials] == [row["state"] for row in rows]
    assert [t["step"] for t in trials] == [row["step"] for row in rows]


@pytest.mark.slow
def test_asha_keeps_the_top_third_at_each_rung(tmp_path: Path) -> None:
    pipeline = write_training(tmp_path / "p", budget=8, parallel=2, rule="asha", extra=", max_steps: 8")
    result = search_cli("run", str(pipeline), "--poll", "0.05", "--seed", "2", cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert len(rows) == 8, rows
    stopped = [row for row in rows if row["state"] == "stopped"]
    assert stopped, (rows, result.stdout)
    assert all("asha rung" in str(row["error"]) for row in stopped)
    check_outcome(pipeline.parent, rows, result.stdout)


@pytest.mark.slow
def test_kill_9_between_the_stop_decision_and_the_cancel_finishes_the_stop_once(tmp_path: Path) -> None:
    pipeline = write_training(tmp_path / "p", budget=8, parallel=2, rule="median")
    # A bad trial waits after epoch 3 until it is stopped: it still runs when the scheduler is run again, however
    # loaded the machine (one that completed meanwhile would be recorded succeeded: a finished trial is never
    # labelled stopped), and one never stopped keeps the search from ending, which fails the test.
    (pipeline.parent / "hopeless-waits.txt").write_text("3")
    db = tmp_path / ".dagflow" / "search.db"
    args = ("run", str(pipeline), "--poll", "0.05", "--seed", "2")
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "search", *args],
        cwd=tmp_path,
        env={**cli_env(), STOP_PAUSE_ENV: "600"},  # the scheduler waits inside the window
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for(lambda: any(row["state"] == "stopping" for row in trial_rows(db)), timeout=180)
    os.kill(scheduler.pid, signal.SIGKILL)
    scheduler.wait()
    [stopping] = [row for row in trial_rows(db) if row["state"] == "stopping"]
    result = search_cli(*args, cwd=tmp_path, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    rows = trial_rows(db)
    assert len(rows) == 8, rows
    [after] = [row for row in rows if row["number"] == stopping["number"]]
    assert after["state"] == "stopped" and after["value"] == stopping["value"] and after["step"] == stopping["step"]
    assert result.stdout.count(f"[t{stopping['number']}] stopped at step") == 1
    # every trial's script ran once: the stopped one was not restarted, none was lost or repeated
    assert sorted(calls(pipeline.parent)) == sorted(str(row["run_id"]) for row in rows)
    check_outcome(pipeline.parent, rows, result.stdout)


# -- the parts on their own ------------------------------------------------------------------------


def test_median_rule_compares_the_best_so_far_with_the_median_at_a_step_enough_others_reported() -> None:
    rule = MedianRule(min_steps=2, min_trials=2)
    good = {1: 1.0, 2: 0.5, 3: 0.33}
    losses = {"a": good, "b": good, "c": {1: 5.0, 2: 4.0, 3: 3.0, 4: 2.9}}
    assert rule.judge("c", losses) is not None  # at step 3 (step 4: only itself)
    assert rule.judge("a", losses) is None  # equal to the median is not worse
    assert rule.judge("c", {"a": good, "c": losses["c"]}) is None  # one other trial: not enough
    assert rule.judge("c", {**losses, "c": {1: 5.0}}) is None  # before min_steps


def test_asha_rungs_and_cutoffs() -> None:
    rule = AshaRule(min_steps=1, min_trials=2, factor=3, max_steps=27)
    assert rule.rungs(100) == [1, 3, 9]
    losses = {"a": {1: 1.0, 3: 0.5}, "b": {1: 1.2, 3: 1.5}, "c": {1: 3.0}}
    assert rule.judge("c", losses) is not None  # at rung 0 (step 1) only a is in the top third
    assert rule.judge("b", losses) is None  # top third of b's two others; at rung 1 only one other
    assert rule.judge("a", losses) is None
    later = {**losses, "d": {1: 0.1, 3: 0.1}, "e": {1: 0.1, 3: 0.1}}
    assert rule.judge("b", later) is None  # judged once per rung: it passed both before d and e came
    # a trial found running on restart is judged only at the highest rung it reached
    fresh = AshaRule(min_steps=1, min_trials=2, factor=3, max_steps=27)
    assert "rung 0" in str(fresh.judge("b", later))
    resumed = AshaRule(min_steps=1, min_trials=2, factor=3, max_steps=27)
    resumed.resume("b", later["b"])
    assert "rung 1" in str(resumed.judge("b", later))


def test_progress_reader_reads_only_whole_new_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    reader = ProgressReader("loss")
    assert reader.curve(path) == {}
    report(path, 1, loss=0.9)
    with path.open("a") as handle:
        handle.write('{"step": 2, "loss": 0.8')  # half a line: not yet
    assert reader.curve(path) == {1: 0.9}
    with path.open("a") as handle:
        handle.write('}\nnot json\n{"loss": 0.7}\n{"step": 3, "loss": NaN}\n')
    assert reader.curve(path) == {1: 0.9, 2: 0.8}
    path.write_text('{"step": 1, "loss": 0.5}\n')  # rewritten: read again from the start
    assert reader.curve(path) == {1: 0.5}
    assert mean_curve([{1: 1.0, 2: 2.0}, {1: 3.0}]) == {1: 2.0}


def test_the_result_is_the_last_line_and_a_plain_json_file_still_reads(tmp_path: Path) -> None:
    lines = tmp_path / "lines.jsonl"
    lines.write_text('{"step": 1, "loss": 0.9}\n{"step": 2, "loss": 0.8}\n{"loss": 0.75}\n')
    assert read_metric(lines, "loss") == 0.75
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"loss": 0.5}, indent=2))
    assert read_metric(plain, "loss") == 0.5


def test_stopped_trials_inform_the_optimiser_with_their_last_loss(tmp_path: Path) -> None:
    store = SearchStore(tmp_path / "s.db")
    store.open_search("s", "pipeline", "p", "f", {}, 1, 4, 1)
    trial = store.add_trial("s", "", {"x": 0.9}, "local", 60)
    trial = store.mark_submitted(trial, "1")
    assert store.mark_stopping(trial, 5.5, 5.5, 2, "median")
    assert not store.mark_stopping(trial, 5.0, 5.0, 3, "again")  # decided once
    assert not store.finish(trial, "failed")  # a stopping trial ends only as stopped
    assert store.finish_stopping(trial) and not store.finish_stopping(trial)
    [stopped] = store.trials("s")
    assert (stopped.state, stopped.value, stopped.step) == ("stopped", 5.5, 2)
    [observation] = _observations([stopped])
    assert observation.value == 5.5


@pytest.mark.slow
@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("{rule: median, reduction_factor: 2}", "reduction_factor is for rule: asha"),
        ("{rule: asha, min_steps: 4, max_steps: 4}", "max_steps (4) must be above min_steps (4)"),
        ("{rule: hyperband}", "early_stopping.rule"),
        ("{rule: asha, reduction_factor: 1}", "reduction_factor"),
    ],
)
def test_bad_early_stopping_blocks_exit_2_naming_the_field(tmp_path: Path, block: str, message: str) -> None:
    pipeline = write_training(tmp_path / "p", budget=2, parallel=1, rule="median")
    text = pipeline.read_text()
    pipeline.write_text(text[: text.index("  early_stopping:")] + f"  early_stopping: {block}\n")
    result = search_cli("run", str(pipeline), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "pipeline.yaml" in result.stderr
    assert not (tmp_path / ".dagflow" / "runs").exists()


def test_early_stopping_on_an_engine_that_cannot_stream_metric_lines_is_refused(tmp_path: Path) -> None:
    """An engine that declares it cannot stream metric lines while a trial runs (an entry point naming a
    bare Engine class declares no capability) could stop nothing, and would label trials that ran to the end
    as stopped: refused up front, naming the engines that can (HTCondor's among them: its transfer mode
    streams the lines on the node's stderr, engines/condor/progress.py), before any trial is submitted."""
    from dagflow.engines.registry import register_engine, unregister_engine
    from dagflow.search.scheduler import EngineCannotStreamError, Scheduler, SchedulerOptions
    from dagflow.search.trials import PipelineTrials
    from dagflow.spec.load import load_spec

    pipeline = write_training(tmp_path / "p", budget=2, parallel=1, rule="median")
    register_engine("nostream", "dagflow.engines.local.engine:LocalEngine")
    try:
        store = SearchStore(tmp_path / "search.db")
        options = SchedulerOptions(engine="nostream", runs_dir=tmp_path / "runs")
        with pytest.raises(EngineCannotStreamError) as raised:
            Scheduler(PipelineTrials(load_spec(pipeline)), store, options, engine=object())  # type: ignore[arg-type]
    finally:
        unregister_engine("nostream")
    message = str(raised.value)
    assert "early_stopping: the nostream engine cannot show a trial's metric lines while it runs" in message
    assert "--engine local, condor" in message or ("local" in message and "condor" in message), message
    assert not (tmp_path / "runs").exists()
