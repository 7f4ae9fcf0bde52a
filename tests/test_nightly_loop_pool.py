"""The nightly loop end to end on the real one-machine HTCondor pool (tests/condor_pool.py), #43's acceptance:
a per-region search whose trials are DAGMan jobs, then retrains fired by the installed HTCondor cron job
(`dagflow schedule install --condor`, which runs `dagflow submit`) taking each region's best params through
`params: {from_search: ...}`, each followed by its promotion (`promote_if`); source data changed between the
two firings reaches the second firing's models, and every model in the report names its search trial.

Each firing is its own install, at a cron minute far enough ahead that the install is in the queue before it
(so each fires once, and the data changes between them); the waits are for events, with generous limits that
only stop a hung test on a loaded machine that other pool tests share."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from condor_pool import Pool
from test_condor_paths_pool import remove_jobs_under

from dagflow.run.promotions import read_verdict

pytestmark = pytest.mark.condor_pool

SEARCH_TIMEOUT = 1800
FIRING_TIMEOUT = 900

PIPELINE = """\
name: nightly
matrix:
  region: [us, br]
params:
  alpha: 1.0
  from_search: nightly      # the retrain takes each region's best trial's alpha
steps:
  train:
    kind: train
    command: >-
      python train.py --data raw/{region}/data.csv --alpha {params.alpha}
      --out models/{run.id}/{region}/model.json
    inputs:
      - raw/{region}/data.csv
    outputs:
      - models/{run.id}/{region}/model.json
    publish: PUBLISHED/{region}/{run.id}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: >-
      python evaluate.py --region {region} --model models/{run.id}/{region}/model.json
      --out models/{run.id}/{region}/metrics.json
    inputs:
      - models/{run.id}/{region}/model.json
    outputs:
      - models/{run.id}/{region}/metrics.json
    metrics: models/{run.id}/{region}/metrics.json
    promote_if: {metric: loss, better: lower, than: "PUBLISHED/{region}/latest"}
search:
  objective: {metric: loss}
  variables:
    alpha: {type: FLOAT, min: 0.0, max: 4.0}
  budget: 2
  parallel: 2
  per: region
  optimizer: random
schedule: {cron: "CRON"}
"""

TRAIN = """\
import argparse, csv, json, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--data")
parser.add_argument("--alpha", type=float)
parser.add_argument("--out")
args = parser.parse_args()
rows = list(csv.reader(open(args.data)))
out = pathlib.Path(args.out)
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"alpha": args.alpha, "rows": len(rows), "last": rows[-1]}))
"""

# The loss falls with more data: a firing on more rows beats the model an earlier one promoted.
EVALUATE = """\
import argparse, json, pathlib
parser = argparse.ArgumentParser()
parser.add_argument("--region")
parser.add_argument("--model")
parser.add_argument("--out")
args = parser.parse_args()
model = json.loads(open(args.model).read())
target = {"us": 1.0, "br": 3.0}[args.region]
loss = (model["alpha"] - target) ** 2 + 1.0 / model["rows"]
pathlib.Path(args.out).write_text(json.dumps({"loss": loss, "rows": model["rows"]}))
"""


def write_rows(work: Path, region: str, count: int, start: int = 0) -> None:
    path = work / "raw" / region / "data.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as out:
        out.writelines(f"{index},{index * 2}\n" for index in range(start, start + count))


def next_minute_cron() -> str:
    """A cron expression firing once, at a minute 40-100 s from now (local time, as the schedd's)."""
    when = datetime.now() + timedelta(seconds=100)
    return f"{when.minute} {when.hour} * * *"


def fire_once(pool: Pool, work: Path, seen: set[str]) -> str:
    """Install the HTCondor cron job at the next minute, wait for its firing's run to appear and end, and
    remove the job; the new run's id."""
    text = PIPELINE.replace("PUBLISHED", str(work / "published")).replace("CRON", next_minute_cron())
    (work / "pipeline.yaml").write_text(text)
    pool.give(work / "pipeline.yaml")
    installed = pool.dagflow(["schedule", "install", "--condor", "pipeline.yaml"], cwd=work)
    assert "HTCondor cron job" in installed.stdout, installed.stdout
    runs = work / ".dagflow" / "runs"
    try:
        def new_run() -> str | None:
            found = {path.name for path in runs.glob("nightly-2*") if (path / "plan.json").exists()} - seen
            return min(found) if found else None

        run_id = pool.wait_until(new_run, "the cron job's firing to submit a run", FIRING_TIMEOUT)
        assert isinstance(run_id, str)
        status = pool.wait_until(
            lambda: (s := pool.status(work, run_id)).get("state") not in (None, "running", "not-started") and s,
            f"the fired run {run_id} to end", FIRING_TIMEOUT,
        )  # fmt: skip
        assert status["state"] == "succeeded", status  # type: ignore[index]
    finally:
        removed = pool.dagflow(["schedule", "remove", "pipeline.yaml"], cwd=work, check=False)
        assert "removed 1 HTCondor cron job(s)" in removed.stdout, removed.stdout + removed.stderr
    err = work / ".dagflow" / "schedule" / "nightly.condor.err"
    assert "error" not in err.read_text(), err.read_text()
    return run_id


def model_of(work: Path, run_id: str, region: str) -> dict:
    return json.loads((work / "models" / run_id / region / "model.json").read_text())


def verdicts(work: Path, run_id: str) -> dict[str, str]:
    """Each region's promotion verdict, as the run directory records it (the report and summary read them)."""
    run_dir = work / ".dagflow" / "runs" / run_id
    found = {region: read_verdict(run_dir, f"evaluate.promote.{region}") for region in ("us", "br")}
    return {region: verdict["verdict"] if verdict else "none" for region, verdict in found.items()}


def test_search_then_cron_fired_retrains_take_each_regions_best_params_and_promote(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("nightly")
    for region in ("us", "br"):
        write_rows(work, region, 4)
    (work / "train.py").write_text(TRAIN)
    (work / "evaluate.py").write_text(EVALUATE)
    (work / "pipeline.yaml").write_text(PIPELINE.replace("PUBLISHED", str(work / "published")).replace(
        "CRON", "0 3 * * *"))  # fmt: skip
    pool.give(work)
    try:
        # 1. the per-region search, its trials DAGMan jobs on the pool
        search = pool.dagflow(
            ["search", "run", "pipeline.yaml", "--engine", "condor", "--seed", "5", "--poll", "2",
             "--start-grace", "10m"], cwd=work, timeout=SEARCH_TIMEOUT,
        )  # fmt: skip
        assert "search nightly us done" in search.stdout and "search nightly br done" in search.stdout, search.stdout
        summary = json.loads(pool.dagflow(["search", "status", "nightly", "--json", "--no-plot"], cwd=work).stdout)
        best = {region: info["best"] for region, info in summary["regions"].items()}
        assert all(best[region] is not None for region in ("us", "br")), summary

        # 2. the first firing of the installed cron job: each region trains with its best trial's alpha
        first = fire_once(pool, work, set())
        for region in ("us", "br"):
            model = model_of(work, first, region)
            assert model["alpha"] == pytest.approx(best[region]["params"]["alpha"]) and model["rows"] == 4, model
        # the search's best trial had promoted the same model quality: an equal loss keeps it
        assert verdicts(work, first) == {"us": "kept", "br": "kept"}

        # 3. new source data, then the second firing: its models are trained on it and promoted
        for region in ("us", "br"):
            write_rows(work, region, 4, start=4)
        pool.give(work / "raw")
        time.sleep(1)  # a new mtime second on coarse filesystems
        second = fire_once(pool, work, {first})
        for region in ("us", "br"):
            model = model_of(work, second, region)
            assert model["rows"] == 8 and model["last"] == ["7", "14"], model
            assert model["alpha"] == pytest.approx(best[region]["params"]["alpha"]), model
        assert verdicts(work, second) == {"us": "promoted", "br": "promoted"}
        for region in ("us", "br"):
            pointer = (work / "published" / region / "latest").read_text()
            assert second in pointer, pointer

        # 4. the report names each model's search trial, and each promotion's
        report = pool.dagflow(["report", second], cwd=work)
        html = Path(report.stdout.strip()).read_text()
        assert "Models and the search trials they came from" in html and "<th>search trial</th>" in html
        for region in ("us", "br"):
            trial = best[region]["trial"]
            assert f"<td>{region}</td><td>train.{region}</td>" in html, html
            assert f"search &#x27;nightly&#x27; t{trial}</td><td>nightly-t{trial}-{region}</td>" in html
    finally:
        for cluster in queued_cron_jobs(pool, work):
            pool.run(["condor_rm", cluster], check=False)
        remove_jobs_under(pool, work)


def queued_cron_jobs(pool: Pool, work: Path) -> list[str]:
    """Cron jobs of this pipeline still in the queue (none once the test removed them)."""
    done = pool.run(["condor_q", "-constraint", f'DagflowSchedulePipeline == "{work / "pipeline.yaml"}"',
                     "-af", "ClusterId"], check=False)  # fmt: skip
    return done.stdout.split()

