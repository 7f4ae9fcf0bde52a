"""#43 item 1 on the real HTCondor pool (tests/condor_pool.py): a job is never sent its own old outputs. A
second submission used to list the previous run's model among the job's transfer_input_files, so a clean
retrain (the old models removed while the jobs wait) failed its nodes with `Transfer input files failure ...
No such file`."""

from __future__ import annotations

import json
import shutil

import pytest
from condor_pool import Pool

pytestmark = pytest.mark.condor_pool

RUN_TIMEOUT = 1200  # a whole DAG on a loaded 2-core machine: only stops a hang

TRAIN = """\
import argparse, json, os
parser = argparse.ArgumentParser()
parser.add_argument("--data")
parser.add_argument("--out")
args = parser.parse_args()
rows = open(args.data).read().splitlines()
os.makedirs(os.path.dirname(args.out), exist_ok=True)
json.dump({"rows": len(rows)}, open(args.out, "w"))
"""

# gate waits for a file the test makes (the pool is this machine, so the job sees the absolute path), so the
# second submission's train job waits while the old model is removed.
PIPELINE = """\
name: retrain
matrix:
  region: [us]
steps:
  gate:
    command: [sh, -c, "while [ ! -e {go} ]; do sleep 0.2; done"]
  train:
    needs: [gate]
    command: python train.py --data data/{{region}}/data.csv --out models/{{region}}/model.json
    inputs:
      - data/{{region}}/data.csv
    outputs:
      - models/{{region}}/model.json
"""


def test_a_clean_retrain_is_not_sent_the_last_runs_model(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("old-outputs")
    go = work / "go"
    (work / "pipeline.yaml").write_text(PIPELINE.format(go=go))
    (work / "train.py").write_text(TRAIN)
    (work / "data" / "us").mkdir(parents=True)
    (work / "data" / "us" / "data.csv").write_text("a\nb\n")
    go.write_text("")
    pool.give(work)
    first = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "transfer"], cwd=work,
                         check=False, timeout=RUN_TIMEOUT)  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads((work / "models" / "us" / "model.json").read_text()) == {"rows": 2}

    go.unlink()
    (work / "data" / "us" / "data.csv").write_text("a\nb\nc\n")
    pool.give(work)
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "transfer"], cwd=work)
    run_id = json.loads(done.stdout)["run_id"]
    shutil.rmtree(work / "models")  # a clean retrain: the old models go while the jobs wait
    go.write_text("")
    ended = pool.wait_until(
        lambda: (s := pool.status(work, run_id))["state"] not in ("running", "not-started") and s,
        f"run {run_id} to end",
        timeout=RUN_TIMEOUT,
    )
    assert ended["state"] == "succeeded", json.dumps(ended, indent=1)[:4000]  # type: ignore[index]
    assert json.loads((work / "models" / "us" / "model.json").read_text()) == {"rows": 3}
