"""Ctrl-C during `dagflow run --engine condor` (#43 item 5): it stops the waiting, not the DAG, and says so on
stderr with the exact commands to follow or cancel the run and its DAGMan job, exit 130 (it used to exit 130
saying nothing). Driven through the real CLI and engine with only the schedd's side stood in for (no pool
here: the DAGMan job is recorded as submitted); tests/test_condor_interrupt_pool.py does it on the pool."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

PIPELINE = """\
name: sleepers
steps:
  nap:
    command: python -c "import time; time.sleep(600)"
    resources: {memory: 64MB, disk: 10MB}
"""

# `dagflow run ...` with submit_prepared recording the DAGMan job 4242 as the schedd would have taken it.
DRIVER = """\
import sys
from dagflow.engines.condor import engine

def submitted(prepared, dry_run=False, rescue=None):
    prepared.record.add_submission(prepared.layout.run_dir, 4242, rescue)
    prepared.layout.mark_latest()
    return engine.Submission(prepared, "", 4242, rescue)

engine.submit_prepared = submitted
sys.argv = ["dagflow", "run", *sys.argv[1:]]
from dagflow.cli import main
main()
"""


@pytest.mark.parametrize("extra", [[], ["--json"], ["--runs-dir", "elsewhere"]])
def test_ctrl_c_says_the_dag_runs_on_and_how_to_follow_or_cancel_it(tmp_path: Path, extra: list[str]) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    argv = [sys.executable, "-c", DRIVER, "pipeline.yaml", "--engine", "condor", "--data-mode", "shared", *extra]
    run = subprocess.Popen(argv, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)  # fmt: skip
    try:
        assert run.stderr is not None
        seen = [run.stderr.readline()]
        while "waiting for it" not in seen[-1]:
            assert seen[-1], f"dagflow ended before it waited: {''.join(seen)}"
            seen.append(run.stderr.readline())
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    err = "".join(seen) + err
    assert run.returncode == 130, out + err
    runs = tmp_path / ("elsewhere" if extra[:1] == ["--runs-dir"] else ".dagflow/runs")
    (run_id,) = [path.name for path in runs.iterdir() if path.is_dir()]
    hint = " --runs-dir elsewhere" if extra[:1] == ["--runs-dir"] else ""
    assert (
        f"run {run_id} keeps running on HTCondor (DAGMan job 4242.0): follow it with "
        f"`dagflow status {run_id}{hint}`, cancel it with `dagflow cancel {run_id}{hint}`"
    ) in err, err
    assert "Traceback" not in err and "Aborted" not in err
