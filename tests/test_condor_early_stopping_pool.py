"""Search early stopping on the real one-machine HTCondor pool (tests/condor_pool.py), in the transfer data
mode: nothing of the job's directory reaches the access point before the job ends, except its stderr,
which `stream_error` streams while it runs. The node wrapper copies each metric line onto stderr, marked,
and the scheduler reads them there (engines/condor/progress.py), so a hopeless trial is stopped while its
job runs, and a trial that ran to its end is never labelled stopped."""

from __future__ import annotations

import json

import pytest
from condor_pool import Pool
from test_condor_paths_pool import remove_jobs_under
from test_search_scheduler_support import trial_rows

pytestmark = pytest.mark.condor_pool

EPOCHS = 10

# Good trials (x <= 0.6) report loss 1/epoch, hopeless ones 5 + 1/epoch; every epoch takes 2 s, so a job
# runs about 20 s: long enough for lines streamed at epoch 2 or 3 to stop it well before its last epoch.
TRAIN = """\
import argparse, json, os, time
parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float)
parser.add_argument("--out")
args = parser.parse_args()
base = 5.0 if args.x > 0.6 else 0.0
os.makedirs(os.path.dirname(args.out), exist_ok=True)
for epoch in range(1, EPOCHS_ + 1):
    time.sleep(2)
    fd = os.open(args.out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps({"step": epoch, "loss": base + 1.0 / epoch}) + "\\n").encode())
    os.close(fd)
with open(args.out, "a") as handle:
    handle.write(json.dumps({"loss": base + 1.0 / EPOCHS_ + 0.01 * args.x}) + "\\n")
""".replace("EPOCHS_", str(EPOCHS))

PIPELINE = """\
name: curves
params: {x: 0.5}
condor: {data_mode: transfer}
steps:
  train:
    kind: train
    command: python train.py --x {params.x} --out out/{run.id}/metrics.jsonl
    metrics: out/{run.id}/metrics.jsonl
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: 0, max: 1}
  budget: 8
  parallel: 2
  optimizer: random
  early_stopping: {rule: median, min_steps: 2, min_trials: 2}
"""


def test_a_hopeless_trial_is_stopped_while_its_job_runs_in_the_transfer_mode(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("early-stopping")
    (work / "pipeline.yaml").write_text(PIPELINE)
    (work / "train.py").write_text(TRAIN)
    pool.give(work)
    try:
        done = pool.dagflow(
            ["search", "run", "pipeline.yaml", "--engine", "condor", "--seed", "2", "--poll", "1",
             "--start-grace", "10m"],
            cwd=work, timeout=1500, check=False,
        )  # fmt: skip
    finally:
        remove_jobs_under(pool, work)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = trial_rows(work / ".dagflow" / "search.db")
    assert len(rows) == 8 and {row["state"] for row in rows} <= {"succeeded", "stopped"}, rows
    stopped = [row for row in rows if row["state"] == "stopped"]
    assert stopped, (rows, done.stdout)
    for row in rows:
        run_id = str(row["run_id"])
        # the metrics file comes back only with a job that ended: one that did ran all its epochs
        completed = (work / "out" / run_id / "metrics.jsonl").exists()
        if row["state"] == "stopped":
            assert not completed, (row, done.stdout)  # stopped while its job ran
            assert float(row["params"]["x"]) > 0.6, (row, done.stdout)  # type: ignore[index]
            assert 2 <= int(row["step"]) < EPOCHS, (row, done.stdout)  # type: ignore[call-overload]
            assert row["value"] == pytest.approx(5.0 + 1.0 / int(row["step"]))  # type: ignore[call-overload]
            (err,) = (work / ".dagflow" / "runs" / run_id / "logs").glob("train*.err")
            marked = [line for line in err.read_text().splitlines() if line.startswith("dagflow-progress: ")]
            assert len(marked) >= int(row["step"]), err.read_text()  # type: ignore[call-overload]
        else:
            assert completed and row["step"] is None, (row, done.stdout)
            lines = (work / "out" / run_id / "metrics.jsonl").read_text().splitlines()
            assert json.loads(lines[-2])["step"] == EPOCHS
    assert done.stdout.count("] stopped at step ") == len(stopped), done.stdout
