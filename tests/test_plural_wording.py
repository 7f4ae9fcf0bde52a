"""Counts in what dagflow prints and draws agree with their nouns ("1 node", "2 nodes"; never "1 nodes"
nor "node(s)"): the local run's progress and refusals, and the report pages of a one-node run and a
one-trial search. Each through the CLI."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_search_scheduler_support import write_pipeline

BLOCKED = """\
name: blocked
steps:
  ok: {command: "true"}
  a: {command: [sh, -c, "exit 1"]}
  b: {needs: [a], command: "true"}
"""
MANY_FAILURES = """\
name: many
matrix:
  n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21]
steps:
  fail: {command: [sh, -c, "exit 1"]}
"""
ONE_NODE = """\
name: single
steps:
  only: {command: "true"}
"""


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )  # the timeout only keeps a regression from hanging the suite


@pytest.mark.slow
def test_one_blocked_node_is_one_node(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(BLOCKED)
    ran = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert ran.returncode != 0, ran.stdout
    output = ran.stdout + ran.stderr
    assert "1 node will not run: a failed" in output, output
    assert "1 node did not run: a node upstream failed" in output, output
    run_id = next(line.split()[-1] for line in output.splitlines() if line.startswith("resume with: "))
    resumed = dagflow("run", "--resume", run_id, cwd=tmp_path)
    assert "1 node had finished before this resume: not rerun" in resumed.stdout + resumed.stderr, resumed.stdout


def test_one_failure_past_the_twenty_shown_is_one_more_failed_node(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(MANY_FAILURES)
    ran = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert ran.returncode != 0 and "... and 1 more failed node\n" in ran.stdout + ran.stderr, ran.stdout


def gpu_step(gpus: int) -> str:
    return f"name: gpu\nsteps:\n  fit:\n    command: \"true\"\n    resources: {{gpus: {gpus}}}\n"


def test_a_machine_with_one_gpu_has_1_gpu(tmp_path: Path) -> None:
    from dagflow.engines.local.devices import present_devices

    if len(present_devices()) != 1:
        pytest.skip("needs a machine with exactly one GPU")
    (tmp_path / "pipeline.yaml").write_text(gpu_step(2))
    refused = dagflow("run", "pipeline.yaml", "--gpus", "0", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "step fit needs 2 GPUs; this machine has 1 GPU (--gpus 0)" in refused.stderr, refused.stderr


def test_a_step_needing_one_gpu_needs_1_gpu(tmp_path: Path) -> None:
    if shutil.which("nvidia-smi"):
        pytest.skip("this machine has nvidia-smi; the test needs one without GPUs")
    (tmp_path / "pipeline.yaml").write_text(gpu_step(1))
    refused = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "step fit needs 1 GPU; this machine has 0 GPUs (nvidia-smi)" in refused.stderr, refused.stderr


@pytest.mark.slow
def test_the_report_of_a_one_node_run_says_1_node(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(ONE_NODE)
    assert dagflow("run", "pipeline.yaml", cwd=tmp_path).returncode == 0
    made = dagflow("report", "--out", str(tmp_path / "run.html"), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = (tmp_path / "run.html").read_text(encoding="utf-8")
    for wording in (" · 1 node (", "<summary>1 node (click", 'aria-label="DAG of 1 node"', "1 attempt on 1 machine;"):
        assert wording in html, wording
    assert "1 nodes" not in html and "1 attempts" not in html
    again = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert "skipped 1 cached node (" in again.stdout + again.stderr, again.stdout


@pytest.mark.slow
def test_the_page_of_a_one_trial_search_says_1_trial(tmp_path: Path) -> None:
    write_pipeline(tmp_path, budget=1, parallel=1, optimizer="random")
    searched = dagflow("search", "run", "pipeline.yaml", "--poll", "0.05", cwd=tmp_path)
    assert searched.returncode == 0, searched.stdout + searched.stderr
    page = tmp_path / "search.html"
    assert dagflow("report", "--search", "quad", "--out", str(page), cwd=tmp_path).returncode == 0
    html = page.read_text(encoding="utf-8")
    assert '<div class="meta">1 trial (1 succeeded)</div>' in html, html[:3000]


TINY = """\
name: tiny
matrix:
  region: [us, br]
steps:
  hello: {command: ["true"], retries: 1}
"""
# DAGMan's records of a first submission of TINY in which hello.us succeeded and hello.br failed
JOBSTATE = """\
1740837600 INTERNAL *** DAGMAN_STARTED 100.0 ***
1740837605 hello.us SUBMIT 101.0 - - 1
1740837605 hello.br SUBMIT 102.0 - - 1
1740837660 hello.us JOB_TERMINATED 101.0 - - 1
1740837660 hello.us JOB_SUCCESS 0 - - 1
1740837660 hello.br JOB_TERMINATED 102.0 - - 1
1740837660 hello.br JOB_FAILURE 1 - - 1
1740837885 INTERNAL *** DAGMAN_FINISHED 1 ***
"""


def test_resubmitting_an_edited_condor_run_that_keeps_one_node_says_1_node(tmp_path: Path) -> None:
    pytest.importorskip("htcondor2")
    config = tmp_path / "condor_config"  # a schedd nobody listens on: dry runs only
    config.write_text("SCHEDD_HOST = 127.0.0.1:9\nCOLLECTOR_HOST = 127.0.0.1:9\n")
    env = {key: value for key, value in cli_env().items() if not key.startswith("_CONDOR_")}
    env["CONDOR_CONFIG"] = str(config)

    def condor_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args, "--runs-dir", str(tmp_path / "runs")],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)  # fmt: skip

    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(TINY)
    compiled = condor_cli("submit", "--engine", "condor", str(pipeline), "--run-id", "f1", "--dry-run")
    assert compiled.returncode == 0, compiled.stderr
    condor = tmp_path / "runs" / "f1" / "condor"
    (condor / "tiny.jobstate.log").write_text(JOBSTATE)
    (condor / "tiny.dag.rescue001").write_text("DONE hello.us\n")
    record = json.loads((condor / "run.json").read_text())
    record["submissions"] = [{"cluster": 100, "t": 1740837598.0, "rescue": None}]
    (condor / "run.json").write_text(json.dumps(record))
    pipeline.write_text(TINY.replace("retries: 1", "retries: 2"))
    again = condor_cli("resubmit", "f1", "--dry-run")
    assert again.returncode == 0, again.stderr
    assert "(1 finished node kept, 1 to run)" in again.stderr, again.stderr
    assert "and mark 1 node DONE" in again.stdout, again.stdout
