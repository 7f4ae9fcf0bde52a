"""A finished per-region search's results into production (#43 item 8): `dagflow run --params-from-search NAME`
and `params: {from_search: NAME}` run each region with that region's best trial's params, the run records
which trial (plan.json, `dagflow status`, run/provenance.py) and `dagflow report` names each model's trial.
Bad input (an unknown or running search, a region without a result, params the pipeline lacks) is exit 2
with a message, located in the pipeline file where it comes from there. Real searches, runs and files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.plan import Plan
from dagflow.run.layout import RunLayout, latest_run
from dagflow.run.provenance import model_trials, searched_params
from dagflow.search.store import RUNNING, SUCCEEDED, SearchStore

PIPELINE = """\
name: nightly
matrix:
  region: [us, br]
params:
  alpha: 1.0
  tag: plain
steps:
  train:
    kind: train
    command: python train.py --region {region} --alpha {params.alpha} --out out/{run.id}/{region}/metrics.json
    outputs:
      - out/{run.id}/{region}/metrics.json
    metrics: out/{run.id}/{region}/metrics.json
  summary:
    needs: [train]
    over: [region]
    command: [python, -c, "print('summary {params.tag}')"]
search:
  objective: {metric: loss}
  variables:
    alpha: {type: FLOAT, min: 0.0, max: 4.0}
  budget: 2
  per: region
  optimizer: random
"""

TRAIN = """\
import argparse, json, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--region")
parser.add_argument("--alpha", type=float)
parser.add_argument("--out")
args = parser.parse_args()
target = {"us": 1.0, "br": 3.0}[args.region]
out = pathlib.Path(args.out)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"loss": (args.alpha - target) ** 2, "alpha": args.alpha}))
"""


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process of its own; the timeout only stops a hung test (a search runs real trials)."""
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=600
    )


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pipeline directory whose per-region search `nightly` has ended (2 trials per region)."""
    work = tmp_path_factory.mktemp("searched")
    (work / "pipeline.yaml").write_text(PIPELINE)
    (work / "train.py").write_text(TRAIN)
    done = dagflow("search", "run", "pipeline.yaml", "--seed", "3", "--poll", "0.2", cwd=work)
    assert done.returncode == 0, done.stdout + done.stderr
    return work


@pytest.fixture
def work(searched: Path, tmp_path: Path) -> Path:
    """A copy of the searched directory for one test."""
    target = tmp_path / "work"
    shutil.copytree(searched, target, symlinks=True)
    return target


def best_per_region(work: Path, name: str = "nightly") -> dict[str, dict]:
    status = dagflow("search", "status", name, "--json", "--no-plot", cwd=work)
    assert status.returncode == 0, status.stderr
    return {region: info["best"] for region, info in json.loads(status.stdout)["regions"].items()}


def ran_alpha(work: Path, layout: RunLayout, region: str) -> float:
    return json.loads((work / "out" / layout.run_id / region / "metrics.json").read_text())["alpha"]


def add_search(db: Path, name: str, regions: list[str], trials: list[tuple[str, dict, str]], budget: int = 1) -> None:
    """A pipeline search recorded straight in the database: (region, params, state) per trial."""
    store = SearchStore(db)
    try:
        config = {"metric": "loss", "goal": "minimize", "regions": regions, "optimizer": "random"}
        store.open_search(name, "pipeline", "pipeline.yaml", name, config, seed=0, budget=budget, parallel=1)
        for region, params, state in trials:
            trial = store.mark_submitted(store.add_trial(name, region, params, "local", 3600), None)
            if state == SUCCEEDED:
                store.finish(trial, SUCCEEDED, value=0.5, loss=0.5)
            else:
                assert state == RUNNING
    finally:
        store.close()


def test_run_takes_each_regions_best_params_and_records_the_trials(work: Path) -> None:
    best = best_per_region(work)
    assert set(best) == {"us", "br"} and best["us"]["params"] != best["br"]["params"], best
    done = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", cwd=work)
    assert done.returncode == 0, done.stderr
    layout = latest_run(work / ".dagflow" / "runs")
    for region in ("us", "br"):
        assert ran_alpha(work, layout, region) == pytest.approx(best[region]["params"]["alpha"])
    plan = layout.load_plan()
    assert plan.nodes["summary"].params == {"tag": "plain"}  # a node of no region keeps the defaults
    provenance = searched_params(plan)
    assert provenance is not None and provenance.search == "nightly" and provenance.axis == "region"
    for region in ("us", "br"):
        choice = provenance.chosen[region]
        assert (choice.trial, choice.params) == (best[region]["trial"], best[region]["params"])
        assert choice.run_id == f"nightly-t{best[region]['trial']}-{region}"
    assert {name: choice.trial for name, choice in model_trials(plan).items()} == {
        "train.us": best["us"]["trial"], "train.br": best["br"]["trial"],
    }  # fmt: skip
    status = dagflow("status", cwd=work)
    shown = f"overrides: params from search 'nightly': br t{best['br']['trial']}, us t{best['us']['trial']}"
    assert shown in status.stdout, status.stdout
    recorded = json.loads(dagflow("status", "--json", cwd=work).stdout)["overrides"]["from_search"]
    assert recorded["chosen"]["us"]["trial"] == best["us"]["trial"], recorded
    # --set still wins, and --only needs only the kept region's result
    again = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", "--set", "alpha=0.25",
                    "--only", "region=us", cwd=work)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert ran_alpha(work, latest_run(work / ".dagflow" / "runs"), "us") == 0.25


def test_the_pipeline_field_resolves_per_region_and_the_report_names_each_models_trial(work: Path) -> None:
    best = best_per_region(work)
    text = PIPELINE.replace("  alpha: 1.0\n", "  alpha: 1.0\n  from_search: nightly\n")
    (work / "pipeline.yaml").write_text(text)
    done = dagflow("run", "pipeline.yaml", cwd=work)
    assert done.returncode == 0, done.stderr
    layout = latest_run(work / ".dagflow" / "runs")
    assert ran_alpha(work, layout, "br") == pytest.approx(best["br"]["params"]["alpha"])
    assert "from_search" not in layout.load_plan().nodes["summary"].params
    report = dagflow("report", cwd=work)
    assert report.returncode == 0, report.stderr
    html = Path(report.stdout.strip()).read_text()
    assert "Models and the search trials they came from" in html
    for region in ("us", "br"):
        trial = best[region]["trial"]
        row = f"<td>{region}</td><td>train.{region}</td>"
        assert row in html and f"search &#x27;nightly&#x27; t{trial}</td><td>nightly-t{trial}-{region}</td>" in html
    # the search itself still runs from the same file: its trials set the params, from_search is no param
    more = dagflow("search", "run", "pipeline.yaml", "--budget", "3", "--seed", "3", "--poll", "0.2", cwd=work)
    assert more.returncode == 0, more.stdout + more.stderr


def test_a_resume_keeps_the_params_it_was_planned_with(work: Path) -> None:
    """The plan records the trials: a resume after an edit re-plans with them, whatever the search did since."""
    best = best_per_region(work)
    (work / "train.py").write_text("import sys; sys.exit(1)\n")
    failed = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", cwd=work)
    assert failed.returncode == 1, failed.stderr
    add_search(work / ".dagflow" / "search.db", "later", ["us", "br"], [])  # the db changes meanwhile
    (work / "train.py").write_text(TRAIN)
    (work / "pipeline.yaml").write_text(PIPELINE.replace("tag: plain", "tag: edited"))
    resumed = dagflow("run", "--resume", "latest", cwd=work)
    assert resumed.returncode == 0, resumed.stderr
    layout = latest_run(work / ".dagflow" / "runs")
    assert ran_alpha(work, layout, "us") == pytest.approx(best["us"]["params"]["alpha"])
    refused = dagflow("run", "--resume", "latest", "--params-from-search", "nightly", cwd=work)
    assert refused.returncode == 2 and "--params-from-search" in refused.stderr, refused.stderr


def field_error(work: Path, name: str, *args: str) -> str:
    """The error of a run whose pipeline says `from_search: NAME`: exit 2, located at the field."""
    text = PIPELINE.replace("  alpha: 1.0\n", f"  alpha: 1.0\n  from_search: {name}\n")
    (work / "pipeline.yaml").write_text(text)
    before = set((work / ".dagflow" / "runs").glob("nightly-2*"))
    done = dagflow("run", "pipeline.yaml", *args, cwd=work)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and set((work / ".dagflow" / "runs").glob("nightly-2*")) == before
    assert done.stderr.startswith("pipeline.yaml:6:16: params.from_search: "), done.stderr
    return done.stderr


def test_bad_searches_are_clear_errors_located_at_the_field(tmp_path: Path) -> None:
    work = tmp_path
    (work / "train.py").write_text(TRAIN)
    db = work / ".dagflow" / "search.db"
    missing = field_error(work, "nightly")
    assert "no search database at" in missing and "--search-db" in missing, missing
    add_search(db, "nightly", ["us", "br"], [("us", {"alpha": 1.5}, SUCCEEDED), ("br", {"alpha": 2.0}, SUCCEEDED)])
    add_search(db, "half", ["us", "br"], [("us", {"alpha": 1.5}, SUCCEEDED)])
    add_search(db, "busy", ["us", "br"], [("us", {"alpha": 1.5}, SUCCEEDED), ("br", {"alpha": 2.0}, RUNNING)])
    add_search(db, "other", ["us", "br"], [("us", {"beta": 1}, SUCCEEDED), ("br", {"beta": 2}, SUCCEEDED)])
    add_search(db, "short", ["us", "br"], [("us", {"alpha": 1.5}, SUCCEEDED), ("br", {"alpha": 2.0}, SUCCEEDED)],
               budget=4)  # fmt: skip
    unknown = field_error(work, "nightlyy")
    assert "no search 'nightlyy' in" in unknown and "did you mean 'nightly'?" in unknown, unknown
    half = field_error(work, "half")
    assert "search 'half' has no result for region 'br'" in half and "with results: us" in half, half
    assert dagflow("run", "pipeline.yaml", "--only", "region=us", cwd=work).returncode == 0  # us alone: fine
    busy = field_error(work, "busy")
    assert "search 'busy' is still running (1 trial for br in flight)" in busy, busy
    other = field_error(work, "other")
    assert "search 'other' trial t1 for region 'us' set 'beta', which is not a param of pipeline.yaml" in other
    assert "(its params: alpha, tag)" in other, other
    short = field_error(work, "short")
    assert "search 'short' stopped before its budget for region 'us' (1 of 4 trials)" in short, short
    # the flag's errors name the flag (there is no file position to give), and --json keeps them one object
    (work / "pipeline.yaml").write_text(PIPELINE)
    flag = dagflow("run", "pipeline.yaml", "--params-from-search", "half", "--json", cwd=work)
    assert flag.returncode == 2 and "Traceback" not in flag.stderr, flag.stderr
    error = json.loads(flag.stderr)
    assert error["error"].startswith("--params-from-search half: search 'half' has no result for region 'br'")
    wrong_db = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", "--search-db", "nope.db", cwd=work)
    assert wrong_db.returncode == 2 and "--search-db nope.db: no such file" in wrong_db.stderr, wrong_db.stderr


def test_a_node_of_no_region_using_a_searched_param_is_refused(tmp_path: Path) -> None:
    """A report over the regions naming {params.alpha} has no one region's value: exit 2, not the default."""
    (tmp_path / "train.py").write_text(TRAIN)
    add_search(tmp_path / ".dagflow" / "search.db", "nightly", ["us", "br"],
               [("us", {"alpha": 1.5}, SUCCEEDED), ("br", {"alpha": 2.0}, SUCCEEDED)])  # fmt: skip
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("summary {params.tag}", "summary {params.alpha}"))
    done = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    refusal = "step summary uses {params.alpha}, which search 'nightly' chose per region, but it does not fan out"
    assert refusal in done.stderr, done.stderr
    fixed = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", "--set", "alpha=2", cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr


def test_a_non_text_from_search_is_a_located_spec_error(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace("  alpha: 1.0\n", "  alpha: 1.0\n  from_search: 3\n"))
    done = dagflow("validate", "pipeline.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pipeline.yaml:6:16: params.from_search: from_search names a search: expected its name, not 3" in done.stderr


def test_the_plan_records_what_it_took(work: Path) -> None:
    """plan.json's overrides carry the search, and a plan read back gives the same provenance."""
    done = dagflow("run", "pipeline.yaml", "--params-from-search", "nightly", cwd=work)
    assert done.returncode == 0, done.stderr
    raw = json.loads((latest_run(work / ".dagflow" / "runs").run_dir / "plan.json").read_text())
    recorded = raw["overrides"]["from_search"]
    assert recorded["search"] == "nightly" and recorded["axis"] == "region" and set(recorded["chosen"]) == {"us", "br"}
    assert searched_params(Plan.from_dict(raw)) == searched_params(Plan.from_json(json.dumps(raw)))
