"""A queued GPU node's reason on the real pool (#43 item 6): busy when the GPUs that would run it run other
nodes, never when no GPU of the pool could. The pool's machine has two (simulated) GPUs, both with more
than 16 GB (tests/test_condor_gpu_pool.py); two nodes gated on a file the test controls hold both."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

WAIT = """\
import os, sys, time
for _ in range(1800):
    if os.path.exists("release"):
        sys.exit(0)
    time.sleep(1)
sys.exit(1)
"""

PIPELINE = """\
name: gpu-busy
steps:
  hold:
    matrix: {n: [a, b, c]}
    command: python wait.py
    resources: {gpus: 1, gpu_memory: 16GB, memory: 64MB, disk: 10MB}
  huge:
    command: python wait.py
    resources: {gpus: 1, gpu_memory: 200GB, memory: 64MB, disk: 10MB}
"""


def test_a_node_waiting_for_busy_gpus_says_busy_and_an_impossible_one_says_never(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("gpu-busy")
    (work / "pipeline.yaml").write_text(PIPELINE)
    (work / "wait.py").write_text(WAIT)
    pool.give(work)
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=work)
    run_id = json.loads(done.stdout)["run_id"]
    try:
        def reasons() -> dict[str, str] | None:
            nodes = {node["node"]: node for node in pool.status(work, run_id)["nodes"]}
            running = [name for name, node in nodes.items() if node["state"] == "running"]
            waiting = {name: node["why"] or "" for name, node in nodes.items() if node["state"] == "queued"}
            holds = [name for name in waiting if name.startswith("hold")]
            # "N of M slots match; waiting for the negotiator": the collector's slot ad still shows a GPU the
            # other node took (it is updated every few seconds): wait for the next look.
            settled = all("slots match;" not in waiting[name] for name in holds)
            ready = len(running) == 2 and len(holds) == 1 and "huge" in waiting and all(waiting.values()) and settled
            return waiting if ready else None

        waiting = pool.wait_until(reasons, "two GPU nodes running, a third and the huge one explained")
        assert isinstance(waiting, dict)
        held = next(why for name, why in waiting.items() if name.startswith("hold"))
        assert "busy" in held, waiting
        assert "GlobalMemoryMb" not in held and "never" not in held, waiting
        assert "never matches" in waiting["huge"], waiting
        assert "no GPU in the pool has GlobalMemoryMb >= 204800" in waiting["huge"], waiting
    finally:
        (Path(work) / "release").write_text("")
        pool.dagflow(["cancel", run_id], cwd=work, check=False)
