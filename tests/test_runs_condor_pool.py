"""A condor run found by id from anywhere when the user's index of runs lacks it: the schedd knows its DAGMan
job by batch name (the run id) and working directory (the run's condor/ directory). On the real pool
(tests/condor_pool.py)."""

from __future__ import annotations

import json
import os

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool


def test_status_and_logs_of_a_condor_run_the_index_lacks(condor_pool: Pool) -> None:
    pool = condor_pool
    name = f"whereabouts{os.getpid()}"
    workdir, elsewhere = pool.workdir("runs-where"), pool.workdir("runs-elsewhere")
    (workdir / "pipeline.yaml").write_text(
        f"name: {name}\nsteps:\n  hello:\n    command: python3 -c \"print('hello from the pool')\"\n", encoding="utf-8")
    pool.give(workdir)
    indexed = {"XDG_STATE_HOME": str(workdir / "state")}
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir, env=indexed)
    run_id = json.loads(done.stdout)["run_id"]
    assert pool.ended(workdir, run_id)["state"] == "succeeded"
    listed = pool.dagflow(["runs", "--json"], cwd=elsewhere, env=indexed)
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [run_id]

    blank = {"XDG_STATE_HOME": str(elsewhere / "state")}  # an index that never saw the run
    assert pool.dagflow(["runs", "--json"], cwd=elsewhere, env=blank).stdout.strip() == "[]"
    for asked in (run_id, f"{name}-"):  # the id, and a unique start of it
        status = pool.dagflow(["status", asked, "--json"], cwd=elsewhere, env=blank, check=False)
        assert status.returncode == 0, status.stderr
        found = json.loads(status.stdout)
        assert found["run_id"] == run_id and found["state"] == "succeeded"
    logs = pool.dagflow(["logs", run_id, "hello"], cwd=elsewhere, env=blank, check=False)
    assert logs.returncode == 0 and logs.stdout == "hello from the pool\n", logs.stderr
    unknown = pool.dagflow(["status", f"{name}-nope", "--json"], cwd=elsewhere, env=blank, check=False)
    assert unknown.returncode == 2 and "no run in the index of runs" in unknown.stderr, unknown.stderr
