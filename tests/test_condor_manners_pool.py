"""Shared-pool manners on the real pool (#43 item 11): `dagflow submit` warns, before queueing, of a step
no machine of the pool can ever run (and of no other), and the jobs carry the batch name and accounting
group the pipeline and the flags give (condor_q shows them)."""

from __future__ import annotations

import json

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

PIPELINE = """\
name: manners
condor: {accounting_group: group_ml, batch_name: nightly-retrain}
steps:
  fits:
    command: python -c "import time; time.sleep(600)"
    resources: {gpus: 1, gpu_memory: 16GB, memory: 64MB, disk: 10MB}
  huge:
    command: python -c "pass"
    resources: {gpus: 1, gpu_memory: 200GB, memory: 64MB, disk: 10MB}
"""


def _jobs(pool: Pool, run_id: str) -> list[list[str]]:
    done = pool.run(["condor_q", "-constraint", f'DagflowRunId == "{run_id}"', "-af", "DAGNodeName", "JobBatchName",
                     "AcctGroup", "AcctGroupUser", "AccountingGroup"])  # fmt: skip
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def test_submit_warns_of_a_step_that_never_matches_and_jobs_carry_the_manners(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("manners")
    (work / "pipeline.yaml").write_text(PIPELINE)
    pool.give(work)
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared",
                         "--accounting-group-user", "alice"], cwd=work)  # fmt: skip
    run_id = json.loads(done.stdout)["run_id"]
    try:
        assert "step huge never matches" in done.stderr, done.stderr
        assert "no GPU in the pool has GlobalMemoryMb >= 204800" in done.stderr, done.stderr
        assert "step fits" not in done.stderr, done.stderr
        jobs = pool.wait_until(lambda: len(found := _jobs(pool, run_id)) == 2 and found, "both node jobs queued")
        by_node = {row[0]: row[1:] for row in jobs}  # type: ignore[union-attr]
        for node in ("fits", "huge"):
            batch, group, user, accounting = by_node[node]
            assert batch == "nightly-retrain", by_node
            assert (group, user) == ("group_ml", "alice"), by_node
            assert accounting == "group_ml.alice", by_node
    finally:
        pool.dagflow(["cancel", run_id], cwd=work, check=False)
