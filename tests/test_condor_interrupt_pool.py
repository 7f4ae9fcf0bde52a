"""Ctrl-C during `dagflow run --engine condor` on the real pool (#43 item 5): the DAG keeps running, the
message names the DAGMan job that is still in the queue, and `dagflow cancel` (the command it gives) removes
it. Every command runs as the pool's user, as in test_condor_user_path.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

PIPELINE = """\
name: sleepers
steps:
  nap:
    command: {py} -c "import time; time.sleep(600)"
    resources: {{memory: 64MB, disk: 10MB}}
"""


def _queue(pool: Pool, constraint: str) -> list[str]:
    done = pool.run(["condor_q", "-constraint", constraint, "-af", "ClusterId"])
    return [line.strip() for line in done.stdout.splitlines() if line.strip()]


def test_ctrl_c_leaves_the_dag_running_and_says_how_to_follow_and_cancel_it(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("ctrl-c")
    (workdir / "pipeline.yaml").write_text(PIPELINE.format(py=sys.executable))
    condor_pool.give(workdir)
    argv = [sys.executable, "-m", "dagflow", "run", "--engine", "condor", "pipeline.yaml", "--data-mode", "shared"]
    run = subprocess.Popen(condor_pool._as_user(argv, None), cwd=workdir, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        records = Path(workdir) / ".dagflow" / "runs"
        record = condor_pool.wait_until(lambda: next(records.glob("*/condor/run.json"), None), "the DAG submitted")
        run_id = record.parent.parent.name  # type: ignore[union-attr]
        condor_pool.wait_until(lambda: _queue(condor_pool, 'DAGNodeName == "nap"'), "nap to be queued")
        os.killpg(run.pid, signal.SIGINT)  # as a terminal's Ctrl-C does: to the whole foreground process group
        out, err = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, out + err
    said = re.search(r"keeps running on HTCondor \(DAGMan job (\d+)\.0\)", err)
    assert said, err
    assert f"`dagflow status {run_id}`" in err and f"`dagflow cancel {run_id}`" in err, err
    cluster = said.group(1)
    assert _queue(condor_pool, f"ClusterId == {cluster}") == [cluster], "the DAG was not left running"
    condor_pool.dagflow(["cancel", run_id], cwd=workdir)
    condor_pool.wait_until(lambda: not _queue(condor_pool, f"DAGManJobId == {cluster}"), "the cancel to clear it")
