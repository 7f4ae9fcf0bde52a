"""`dagflow logs RUN NODE` while the node's HTCondor job runs, on the real pool (tests/condor_pool.py).

In the shared data mode the job writes its stdout file in place, so logs shows what it printed so far; in
the transfer mode HTCondor sends stdout back when the job ends, and logs says so instead of "has not run".
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

# Prints, then waits (up to 10 minutes) for the test's go-ahead file; the file's path comes in the
# environment, as the transfer mode refuses absolute paths in commands it cannot send.
PIPELINE = """\
name: waiter
steps:
  wait:
    command: sh -c 'echo before-the-wait; for i in $(seq 600); do [ -e "$GO" ] && break; sleep 1; done; echo after'
    env: {{GO: "{go}"}}
"""


def _running(pool: Pool, workdir: Path, run_id: str) -> bool:
    nodes = {node["node"]: node for node in pool.status(workdir, run_id)["nodes"]}
    return nodes.get("wait", {}).get("state") == "running"


@pytest.mark.parametrize("mode", ["shared", "transfer"])
def test_logs_of_a_running_node(condor_pool: Pool, mode: str) -> None:
    pool = condor_pool
    workdir = pool.workdir(f"logs-{mode}")
    go = workdir / "go"
    (workdir / "pipeline.yaml").write_text(PIPELINE.format(go=go), encoding="utf-8")
    pool.give(workdir)
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", mode], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]
    try:
        pool.wait_until(lambda: _running(pool, workdir, run_id), "the node to run")
        if mode == "shared":
            pool.wait_until(
                lambda: "before-the-wait" in pool.dagflow(["logs", run_id, "wait"], cwd=workdir, check=False).stdout,
                "the line printed so far",
            )
        else:
            logs = pool.dagflow(["logs", run_id, "wait"], cwd=workdir, check=False)
            assert logs.returncode == 0, logs.stderr
            assert "has not run" not in logs.stderr
            assert "wait is running" in logs.stderr and "when the job ends" in logs.stderr, logs.stderr
    finally:
        go.write_text("")
        pool.give(go)
    assert pool.ended(workdir, run_id)["state"] == "succeeded"
    final = pool.dagflow(["logs", run_id, "wait"], cwd=workdir)
    assert final.stdout.split() == ["before-the-wait", "after"]
