"""`dagflow submit --engine condor`, `dagflow cancel` and `dagflow resubmit`, through the htcondor2 bindings.

No schedd can run here: htcondor2.Submit.from_dag really builds the DAGMan job (dry runs and rescue
options are checked for real), and a CONDOR_CONFIG naming a schedd and a collector on a closed
loopback port makes "no schedd reachable" deterministic and fast. The last test submits to a real
schedd when this machine's HTCondor configuration has one, and is skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.condor_helpers import write

PIPELINE = """\
name: tiny
matrix:
  region: [us, br]
steps:
  hello:
    kind: command
    command: ["true"]
    retries: 1
"""
DATA = Path(__file__).parent / "data" / "condor"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def unreachable(tmp_path: Path) -> dict[str, str]:
    """Environment whose HTCondor configuration names a schedd and a collector nobody listens on."""
    port = closed_port()
    config = write(tmp_path / "condor_config", f"SCHEDD_HOST = 127.0.0.1:{port}\nCOLLECTOR_HOST = 127.0.0.1:{port}\n")
    env = {key: value for key, value in os.environ.items() if not key.startswith("_CONDOR_")}
    env["CONDOR_CONFIG"] = str(config)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    return env


def dagflow(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dagflow", *args, "--runs-dir", str(cwd / "runs")]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


@pytest.mark.slow
def test_dry_run_builds_the_dagman_job_and_submits_nothing(tmp_path: Path, unreachable: dict[str, str]) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", PIPELINE)
    result = dagflow(
        "submit",
        "--engine",
        "condor",
        str(pipeline),
        "--run-id",
        "dry",
        "--dry-run",
        "--json",
        env=unreachable,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    dag = tmp_path / "runs" / "dry" / "condor" / "tiny.dag"
    assert summary["dry_run"] and summary["dagman_job"] is None and summary["dag"] == str(dag)
    description = summary["description"]
    assert "universe = scheduler" in description and f"-Dag {dag}" in description
    assert 'My.JobBatchName = "dry"' in description and "-DoRescueFrom" not in description
    assert (dag.parent / "tiny.dag.condor.sub").is_file()  # what condor_submit_dag would have written
    record = json.loads((dag.parent / "run.json").read_text())
    assert record["engine"] == "condor" and record["submissions"] == []
    text = dagflow(
        "submit", "--engine", "condor", str(pipeline), "--run-id", "dry2", "--dry-run", env=unreachable, cwd=tmp_path
    )
    assert text.returncode == 0 and text.stdout.startswith("universe = scheduler")
    assert "would submit" in text.stderr and "the local schedd" in text.stderr


@pytest.mark.slow
def test_no_reachable_schedd_is_one_line_exit_3_and_keeps_the_files(
    tmp_path: Path, unreachable: dict[str, str]
) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", PIPELINE)
    started = time.monotonic()
    result = dagflow("submit", "--engine", "condor", str(pipeline), "--run-id", "r1", env=unreachable, cwd=tmp_path)
    assert result.returncode == 3, result.stderr
    assert time.monotonic() - started < 20
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: cannot submit to the local schedd (configuration: ")
    assert "Failed to connect" in lines[0] and "compiled files kept in" in lines[0] and "Traceback" not in result.stderr
    assert (tmp_path / "runs" / "r1" / "condor" / "tiny.dag").is_file()
    status = dagflow("status", "r1", "--json", env=unreachable, cwd=tmp_path)
    assert json.loads(status.stdout)["state"] == "not-started"
    # The kept run can be submitted later: resubmit submits it as compiled (here: still no schedd).
    again = dagflow("resubmit", "r1", "--dry-run", "--json", env=unreachable, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["rescue"] is None
    cancel = dagflow("cancel", "r1", env=unreachable, cwd=tmp_path)
    assert cancel.returncode == 2 and "never submitted" in cancel.stderr


@pytest.mark.slow
def test_a_named_schedd_in_an_unreachable_pool(tmp_path: Path, unreachable: dict[str, str]) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", PIPELINE)
    pool = f"127.0.0.1:{closed_port()}"
    result = dagflow(
        "submit", "--engine", "condor", str(pipeline), "--name", "sched1", "--pool", pool, env=unreachable, cwd=tmp_path
    )
    assert result.returncode == 3
    assert result.stderr.startswith(f"error: cannot reach schedd 'sched1' in pool {pool}: ")
    assert len(result.stderr.strip().splitlines()) == 1


def failed_condor_run(tmp_path: Path, unreachable: dict[str, str]) -> Path:
    """A submitted condor run of tests/data/condor/failed (with its rescue DAG)."""
    pipeline = write(tmp_path / "pipeline.yaml", PIPELINE.replace("name: tiny", "name: ratings"))
    result = dagflow(
        "submit", "--engine", "condor", str(pipeline), "--run-id", "f1", "--dry-run", env=unreachable, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    condor = tmp_path / "runs" / "f1" / "condor"
    for path in (DATA / "failed").iterdir():
        if path.name != "dagflow.jobs.log":  # its nodes are the other pipeline's; the DAG's files suffice
            shutil.copy(path, condor / path.name)
    record = json.loads((condor / "run.json").read_text())
    record["submissions"] = [{"cluster": 100, "t": 1740837598.0, "rescue": None}]
    (condor / "run.json").write_text(json.dumps(record))
    return condor


@pytest.mark.slow
def test_resubmit_uses_the_newest_rescue_dag(tmp_path: Path, unreachable: dict[str, str]) -> None:
    condor = failed_condor_run(tmp_path, unreachable)
    shutil.copy(condor / "ratings.dag.rescue001", condor / "ratings.dag.rescue002")
    result = dagflow("resubmit", "f1", "--dry-run", "--json", env=unreachable, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["rescue"] == 2 and "-DoRescueFrom 2" in summary["description"]
    assert "-update_submit" in summary["description"]  # the .condor.sub of the first submission is rewritten
    real = dagflow("resubmit", "f1", env=unreachable, cwd=tmp_path)
    assert real.returncode == 3 and "compiled" not in real.stderr and "cannot submit to the local schedd" in real.stderr


@pytest.mark.slow
def test_resubmit_refuses_a_running_or_rescue_less_run(tmp_path: Path, unreachable: dict[str, str]) -> None:
    condor = failed_condor_run(tmp_path, unreachable)
    (condor / "ratings.dag.rescue001").unlink()
    missing = dagflow("resubmit", "f1", env=unreachable, cwd=tmp_path)
    assert missing.returncode == 2 and "no rescue DAG" in missing.stderr
    with open(condor / "ratings.jobstate.log", "a") as log:
        log.write("1740837990 INTERNAL *** DAGMAN_STARTED 200.0 ***\n")
    record = json.loads((condor / "run.json").read_text())
    record["submissions"].append({"cluster": 200, "t": 1740837989.0, "rescue": 1})
    (condor / "run.json").write_text(json.dumps(record))
    running = dagflow("resubmit", "f1", env=unreachable, cwd=tmp_path)
    assert running.returncode == 2 and "run f1 is running now (DAGMan job 200.0)" in running.stderr
    cancel = dagflow("cancel", "f1", env=unreachable, cwd=tmp_path)
    assert cancel.returncode == 3 and cancel.stderr.startswith("error: cannot remove job 200 from the local schedd")


# `condor_q -better-analyze` for an 80 GB job on the test pool (V100 + A100), trimmed.
BETTER_ANALYZE_80GB = """\
-- Schedd: condorpool@vm : <127.0.0.1:37147?...
Job 95.000 defines the following attributes:

    FileSystemDomain = "vm"
    GPUsMinMemory = 81920
    RequestGPUs = 1
    RequireGPUs = GlobalMemoryMb >= GPUsMinMemory

slot1@vm has the following attributes:

    TARGET.GPUs = 2

The Requirements expression for job 95.000 reduces to these conditions:

        Slots
Step   Matched  Condition
----- --------- ---------
[0]           1  TARGET.HAS_GPU is true
[9]           1  TARGET.Memory >= RequestMemory
[11]          0  countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs


095.000:  Run analysis summary ignoring user priority.  Of 1 slots on 1 machines,
      1 slots are rejected by your job's requirements
      0 slots reject your job because of their own requirements
      0 slots match and are willing to run your job

No successful match recorded.
Reason for last match failure: no match found
"""


def test_idle_reason_names_the_unmet_gpu_limit() -> None:
    from dagflow.engines.condor.idle_reasons import analyze_argv, summarize

    reason = summarize(BETTER_ANALYZE_80GB)
    assert reason is not None
    assert reason.startswith("idle: 1 of 1 slots are rejected by the job's requirements")
    assert "countMatches(MY.RequireGPUs,TARGET.AvailableGPUs) >= RequestGPUs" in reason
    assert "no GPU of a matching slot has GlobalMemoryMb >= 81920" in reason
    willing = BETTER_ANALYZE_80GB.replace("1 slots are rejected", "0 slots are rejected").replace(
        "0 slots match and", "1 slots match and"
    )
    assert summarize(willing) == "idle: 1 of 1 slots match; waiting for the negotiator or a free slot"
    assert summarize("-- Schedd: condorpool@vm\n") is None
    argv = analyze_argv(95, 'run "x"', "schedd@host", None)
    assert argv[:3] == ["condor_q", "-better-analyze", "-constraint"]
    assert argv[3] == 'ClusterId == 95 && JobStatus == 1 && DagflowRunId == "run \\"x\\""'
    assert argv[4:] == ["-name", "schedd@host"]
