"""The status warmer (engines/condor/status_warmer.py): `dagflow submit` leaves one beside the DAGMan job,
and once that job ends the run is ingested (its journal, observed record and its nodes' usage) before
anyone asks, the same as a status that ingests DAGMan's files itself. A warmer whose run is gone, or
resubmitted, stops doing nothing; one killed in its work leaves status right.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagflow.engines.condor import status_warmer
from dagflow.engines.condor.records import CondorRecord, Submission
from dagflow.run.observed import OBSERVED_FILE, read_observed
from dagflow.run.usage import read_usage
from tests.condor_pool import Pool

PIPELINE = """name: warm
matrix:
  region: [us, br]
steps:
  prepare:
    command: "echo prepared {region}"
  train:
    needs: [prepare]
    command: "echo trained {region}"
"""


def _submit(pool: Pool) -> tuple[Path, str, Path]:
    workdir = pool.workdir("warm")
    (workdir / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    pool.give(workdir)
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]
    return workdir, run_id, workdir / ".dagflow" / "runs" / run_id


def _cluster(run_dir: Path) -> int:
    record = CondorRecord.load(run_dir)
    assert record is not None and record.latest is not None
    return record.latest.cluster


def _status_json(pool: Pool, workdir: Path, run_id: str) -> dict:
    return json.loads(pool.dagflow(["status", run_id, "--json"], cwd=workdir).stdout)


@pytest.mark.condor_pool
def _ingested(run_dir: Path) -> bool:
    observed = read_observed(run_dir)
    return observed is not None and not observed.alive


@pytest.mark.condor_pool
def test_a_finished_dag_is_ingested_before_anyone_asks(condor_pool: Pool) -> None:
    workdir, run_id, run_dir = _submit(condor_pool)
    cluster = _cluster(run_dir)
    condor = run_dir / "condor"
    # No `dagflow status` until the DAGMan job has left the queue and the warmer ingested the run.
    queued = ["condor_q", "-constraint", f"ClusterId == {cluster}", "-af", "ClusterId"]
    condor_pool.wait_until(lambda: not condor_pool.run(queued).stdout.strip(), "the DAGMan job to leave the queue")
    condor_pool.wait_until(lambda: _ingested(run_dir), "the warmer to ingest the run")
    assert {record.node for record in read_usage(run_dir)} == {"prepare.us", "prepare.br", "train.us", "train.br"}
    assert (condor / status_warmer.LOG_FILE).read_text() == ""  # no error
    kept = _status_json(condor_pool, workdir, run_id)
    assert kept["state"] == "succeeded" and kept["counts"] == {"succeeded": 4}
    (run_dir / OBSERVED_FILE).unlink()
    assert _status_json(condor_pool, workdir, run_id) == kept  # what the files say, ingested again


@pytest.mark.condor_pool
def test_a_warmer_killed_while_it_works_leaves_status_right(condor_pool: Pool) -> None:
    workdir, run_id, run_dir = _submit(condor_pool)
    condor_pool.wait_until(lambda: _ingested(run_dir), "the warmer to ingest the run")
    truth = _status_json(condor_pool, workdir, run_id)
    for delay in (0.05, 0.2, 0.5):  # a warmer of the ended job, killed at some point of its work
        for path in (run_dir / "journal.jsonl", run_dir / OBSERVED_FILE):
            path.unlink()  # ingested again from the start
        argv = [sys.executable, "-m", "dagflow.engines.condor.status_warmer", str(run_dir), str(_cluster(run_dir))]
        # as the pool user, in a process group of its own (runuser's child stays in it)
        warmer = subprocess.Popen(condor_pool._as_user(argv, None), cwd=workdir, start_new_session=True)
        time.sleep(delay)
        os.killpg(warmer.pid, signal.SIGKILL)
        warmer.wait(timeout=60)
        assert _status_json(condor_pool, workdir, run_id) == truth


def test_a_warmer_stops_when_its_run_is_resubmitted_or_gone(tmp_path: Path) -> None:
    """No DAGMan job log at all (it never appeared): the warmer looks at the run between waits and stops
    when a newer submission is the latest or the run directory is removed, doing nothing."""
    run_dir = tmp_path / "run"
    (run_dir / "condor").mkdir(parents=True)
    record = CondorRecord(dag=str(run_dir / "condor" / "x.dag"), submissions=[Submission(7, 0.0)])
    record.save(run_dir)
    argv = [sys.executable, "-c", "import sys; from dagflow.engines.condor import status_warmer as w; "
            "w.FOLLOW_S = 0.2; sys.exit(w.main(sys.argv[1:]))", str(run_dir), "7"]  # fmt: skip
    warmer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    record.add_submission(run_dir, 8)  # resubmitted: job 8 has its own warmer
    out, _ = warmer.communicate(timeout=120)
    assert warmer.returncode == 0 and out == ""
    assert not (run_dir / OBSERVED_FILE).exists()

    record.submissions = [Submission(9, 0.0)]
    record.save(run_dir)
    argv[-1] = "9"
    warmer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for path in sorted(run_dir.rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    run_dir.rmdir()
    out, _ = warmer.communicate(timeout=120)
    assert warmer.returncode == 0 and out == ""
