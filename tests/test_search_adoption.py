"""A search adopts a run only when the run records that it is this very trial's (the search's uid in
its database, the trial's number and its exact params): a same-named search in a fresh database, or a
stray run directory of a trial's name, never lends its results to new params."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_search_scheduler_support import calls, search_cli, trial_rows, write_pipeline

from dagflow.search.ownership import TRIAL_FILE, identity, record_owner
from dagflow.search.scheduler import Scheduler, SchedulerOptions
from dagflow.search.store import SearchStore, SearchStoreError
from dagflow.search.trials import PipelineTrials, config_of, fingerprint
from dagflow.spec import load_spec


def expected_loss(params: dict) -> float:
    return (params["x"] - 0.3) ** 2 + 0.1 * params["k"] + (0.5 if params["mode"] == "b" else 0.0)


@pytest.mark.slow
def test_a_same_named_search_in_a_fresh_database_runs_its_own_trials(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=2, parallel=1)
    common = ("run", str(pipeline), "--name", "k1", "--poll", "0.05")
    first = search_cli(*common, "--seed", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    old_runs = {str(row["run_id"]) for row in trial_rows(tmp_path / ".dagflow" / "search.db")}
    assert old_runs == {"k1-t1", "k1-t2"}

    second = search_cli(*common, "--seed", "2", "--db", "fresh.db", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    rows = trial_rows(tmp_path / "fresh.db")
    assert [row["state"] for row in rows] == ["succeeded", "succeeded"]
    for row in rows:
        assert str(row["run_id"]).startswith(f"k1-t{row['number']}-") and row["run_id"] not in old_runs
        assert row["value"] == pytest.approx(expected_loss(row["params"]))  # its own params' result
    assert "exists but is not this trial's own" in second.stdout
    assert sorted(calls(pipeline.parent)) == sorted([*old_runs, *(str(row["run_id"]) for row in rows)])
    # the old runs are untouched and each new run records whose it is
    for row in rows:
        recorded = json.loads((tmp_path / ".dagflow" / "runs" / str(row["run_id"]) / TRIAL_FILE).read_text())
        assert recorded["params"] == row["params"] and recorded["number"] == row["number"]
    old = json.loads((tmp_path / ".dagflow" / "runs" / "k1-t1" / TRIAL_FILE).read_text())
    assert old["search_id"] != recorded["search_id"]  # the first database's search, left as it was


@pytest.mark.parametrize("change", ["params", "search_id", "number", "missing"])
def test_a_recorded_trial_is_adopted_only_on_an_exact_match(tmp_path: Path, change: str) -> None:
    """A trial left `submitting` whose run directory exists: adopted only if that run is provably its own."""
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1, optimizer="random")
    runs_dir = tmp_path / ".dagflow" / "runs"
    store = SearchStore(tmp_path / ".dagflow" / "search.db")
    source = PipelineTrials(load_spec(pipeline))
    record = store.open_search("quad", "pipeline", source.source, fingerprint(source), config_of(source), 3, 1, 1)
    trial = store.add_trial("quad", "", {"x": 0.9, "k": 3, "mode": "b"}, "local", 60)
    # a finished run of this trial's name that ran other params (an older search's)
    from local_run import run_local

    from dagflow.engines.local import RunOptions

    other_params = {"x": 0.3, "k": 1, "mode": "a"}
    assert run_local(source.plan("", 1, other_params, trial.run_id), RunOptions(runs_dir=runs_dir)).ok
    owner = identity(record.uid, trial)
    if change == "params":
        owner["params"] = other_params
    elif change == "search_id":
        owner["search_id"] = "another-database"
    elif change == "number":
        owner["number"] = 2
    if change != "missing":
        assert record_owner(runs_dir / trial.run_id, owner)

    lines: list[str] = []
    options = SchedulerOptions(runs_dir=runs_dir, poll_s=0.05, seed=3)
    assert Scheduler(source, store, options, say=lines.append).run() == 0
    (done,) = store.trials("quad")
    assert done.state == "succeeded" and done.run_id != trial.run_id
    assert done.value == pytest.approx(expected_loss(trial.params))
    assert not any("adopted" in line for line in lines)


def test_the_other_fingerprint_message_asks_for_another_name(tmp_path: Path) -> None:
    store = SearchStore(tmp_path / "search.db")
    store.open_search("k1", "pipeline", "a.yaml", "one", {}, 1, 2, 1)
    with pytest.raises(SearchStoreError) as caught:
        store.open_search("k1", "pipeline", "b.yaml", "two", {}, 1, 2, 1)
    message = str(caught.value)
    assert "start a new search with another --name" in message and "never reused" in message
    assert "delete" not in message
