"""Submissions the schedd accepts but can never start, on the real pool (tests/condor_pool.py).

`dagflow submit` refuses them up front (root, a run directory the submitter cannot write, one under /tmp,
where DAGMan refuses its default node log); `dagflow status` says why a DAGMan job that cannot start does
not run (the schedd puts it in cool down and logs the error); `dagflow cancel` ends such a run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

PIPELINE = """\
name: tiny
steps:
  hello:
    command: echo hello
"""


def _workdir(pool: Pool, name: str) -> Path:
    workdir = pool.workdir(name)
    (workdir / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    pool.give(workdir)
    return workdir


def _queued(pool: Pool, run_id: str) -> list[str]:
    done = pool.run(["condor_q", "-constraint", f'JobBatchName == "{run_id}"', "-af", "ClusterId"])
    return done.stdout.split()


def test_root_is_refused_before_anything_is_queued(condor_pool: Pool) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    workdir = _workdir(condor_pool, "root")
    env = {**condor_pool.env, "HOME": str(workdir)}
    run_id = f"root-{uuid.uuid4().hex[:8]}"
    argv = [sys.executable, "-m", "dagflow", "submit", "pipeline.yaml", "--data-mode", "shared", "--run-id", run_id]
    done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "as root" in done.stderr and "runuser" in done.stderr and "Traceback" not in done.stderr
    assert _queued(condor_pool, run_id) == []
    dry = subprocess.run([*argv[:-1], run_id + "-dry", "--dry-run"], cwd=workdir, env=env, capture_output=True,
                         text=True, timeout=120, check=False)
    assert dry.returncode == 0, dry.stderr  # a dry run submits nothing: root may look at the files


def test_a_run_directory_under_tmp_is_refused(condor_pool: Pool) -> None:
    runs = Path("/tmp") / f"dagflow-runs-{uuid.uuid4().hex[:8]}"
    runs.mkdir()
    condor_pool.give(runs)
    try:
        workdir = _workdir(condor_pool, "tmp")
        done = condor_pool.dagflow(["submit", "pipeline.yaml", "--data-mode", "shared", "--runs-dir", str(runs)],
                                   cwd=workdir, check=False)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "under /tmp" in done.stderr and "--runs-dir" in done.stderr and "Traceback" not in done.stderr
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def test_an_unwritable_runs_directory_is_refused(condor_pool: Pool) -> None:
    workdir = _workdir(condor_pool, "unwritable")
    runs = workdir / "runs"
    runs.mkdir(mode=0o555)
    runs.chmod(0o555)  # the pool user owns it (given below) but may not write it
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["submit", "pipeline.yaml", "--data-mode", "shared", "--runs-dir", str(runs)],
                               cwd=workdir, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {runs}" in done.stderr and "Traceback" not in done.stderr
    assert list(runs.iterdir()) == []


def test_status_says_why_the_dagman_job_cannot_start_and_cancel_ends_it(condor_pool: Pool) -> None:
    pool = condor_pool
    workdir = _workdir(pool, "cooldown")
    prepared = pool.dagflow(["submit", "pipeline.yaml", "--data-mode", "shared", "--dry-run", "--json"], cwd=workdir)
    summary = json.loads(prepared.stdout)
    run_id, dag = summary["run_id"], Path(summary["dag"])
    # A DAGMan output file the schedd (as the pool user) cannot open: what a run directory root wrote gives.
    blocker = dag.with_name(dag.name + ".lib.out")
    blocker.write_text("")
    if os.geteuid() == 0:
        shutil.chown(blocker, "root")
    blocker.chmod(0o444)
    pool.dagflow(["resubmit", run_id], cwd=workdir)
    pool.wait_until(
        lambda: pool.run(["condor_q", "-constraint", f'JobBatchName == "{run_id}"', "-af", "NumJobCoolDowns"]
                         ).stdout.strip() not in ("", "undefined"),
        "the schedd to put the DAGMan job in cool down",
    )
    status = pool.status(workdir, run_id)
    assert status["state"] == "running"
    reason = status["condor"]["dagman_reason"]
    assert reason and "could not start" in reason and "Permission denied" in reason and str(blocker) in reason
    text = pool.dagflow(["status", run_id], cwd=workdir, check=False)
    assert "could not start" in text.stdout
    pool.dagflow(["cancel", run_id], cwd=workdir)
    ended = pool.wait_until(lambda: (s := pool.status(workdir, run_id))["state"] != "running" and s,
                            "the cancelled run to end", timeout=120)
    assert ended["state"] == "interrupted", ended  # type: ignore[index]
    assert _queued(pool, run_id) == []
