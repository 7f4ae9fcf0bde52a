"""The whole user path on a real HTCondor pool: submit, status against condor_q and condor_history,
cancel, rescue and resubmit, RETRY ... UNLESS-EXIT, MAXJOBS, holds, `run --engine condor` and its resume,
and the condor_q recipes docs/engines/htcondor.md gives.

Every command runs as the pool's user (HTCondor refuses jobs owned by root) in a directory it owns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from itertools import pairwise
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "region-retrain"
PY = sys.executable


def _pipeline(workdir: Path, text: str) -> Path:
    path = workdir / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _submit(pool: Pool, workdir: Path, *extra: str) -> str:
    pool.give(workdir)
    # shared: these pipelines count their runs in files of the pipeline's directory
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared", *extra], cwd=workdir)
    return json.loads(done.stdout)["run_id"]



def _nodes(status: dict) -> dict[str, dict]:
    return {node["node"]: node for node in status["nodes"]}



def _submitted(record: Path) -> bool:
    """Whether the run's condor record holds a DAGMan submission yet (it is written before the first one)."""
    try:
        return bool(json.loads(record.read_text())["submissions"])
    except (OSError, ValueError, KeyError):
        return False


def _dagman_cluster(workdir: Path, run_id: str) -> int:
    record = json.loads((workdir / ".dagflow" / "runs" / run_id / "condor" / "run.json").read_text())
    return int(record["submissions"][-1]["cluster"])


def _queue(pool: Pool, constraint: str, *attrs: str) -> list[list[str]]:
    done = pool.run(["condor_q", "-constraint", constraint, "-af", *attrs])
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def _history(pool: Pool, constraint: str, *attrs: str) -> list[list[str]]:
    done = pool.run(["condor_history", "-constraint", constraint, "-af", *attrs])
    return [line.split() for line in done.stdout.splitlines() if line.strip()]


def _node_jobs(pool: Pool, cluster: int) -> str:
    return f"DAGManJobId == {cluster}"


# Schedd JobStatus codes -> the dagflow node states that may show them (a job that just left the
# queue can already read as finished in DAGMan's files).
_AGREES = {"1": {"queued"}, "2": {"running"}, "2-setup": {"queued", "running"}, "5": {"held"}}
# The schedd sets JobStatus 2 when it starts the job's shadow; the execute event (what DAGMan, condor_watch_q
# and dagflow read) comes only once the starter has set up the job and the shadow hears it began, and the
# shadow sets JobCurrentStartExecutingDate just before writing it (condor_shadow's beginExecution). So a
# job is compared as running only once condor_q shows it executing in its current activation.
_EXECUTING = "JobCurrentStartExecutingDate >= JobCurrentStartDate"


def _states(pool: Pool, cluster: int) -> dict[str, str]:
    """condor_q's state code per node job: its JobStatus, or "2-setup" for a job started but not executing."""
    rows = _queue(pool, _node_jobs(pool, cluster), "DAGNodeName", "JobStatus", _EXECUTING)
    return {name: "2-setup" if code == "2" and executing != "true" else code for name, code, executing in rows}


def test_submit_runs_the_example_like_a_local_run_and_status_agrees_with_condor(condor_pool: Pool) -> None:
    local = condor_pool.workdir("example-local")
    shutil.copytree(EXAMPLE, local / "region-retrain")
    subprocess.run([PY, "-m", "dagflow", "run", "pipeline.yaml", "--jobs", "2"], cwd=local / "region-retrain",
                   check=True, capture_output=True)
    onpool = condor_pool.workdir("example-pool")
    shutil.copytree(EXAMPLE, onpool / "region-retrain")
    workdir = onpool / "region-retrain"
    # The report node waits for `gate`, made only once a node job was compared: however loaded the machine,
    # the run cannot end between two looks at condor_q. Its outputs are the same.
    gate = workdir / "gate"
    pipeline = workdir / "pipeline.yaml"
    report = "command: python report.py models --out reports"
    assert report in pipeline.read_text()
    gated = f'command: sh -c "while [ ! -e {gate} ]; do sleep 1; done; exec python report.py models --out reports"'
    pipeline.write_text(pipeline.read_text().replace(report, gated))
    run_id = _submit(condor_pool, workdir)
    cluster = _dagman_cluster(workdir, run_id)

    # While it runs: every node job condor_q shows in the same state before and after reading dagflow's
    # status is in that state in dagflow's status too.
    compared = 0

    def compare() -> bool:
        nonlocal compared
        before = _states(condor_pool, cluster)
        status = condor_pool.status(workdir, run_id)
        after = _states(condor_pool, cluster)
        nodes = _nodes(status)
        for name, code in before.items():
            if after.get(name) == code and code in _AGREES:
                assert nodes[name]["state"] in _AGREES[code], (name, code, nodes[name])
                compared += 1
        return compared > 0 or status["state"] != "running"

    condor_pool.wait_until(compare, "a node job in condor_q while the run goes", timeout=1800)
    gate.touch()
    assert compared > 0, "never saw a node job in condor_q while the run was going"

    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    # After: dagflow agrees with condor_history node by node (one job each, its exit code).
    rows = _history(condor_pool, _node_jobs(condor_pool, cluster), "DAGNodeName", "ExitCode")
    history: dict[str, list[str]] = {}
    for name, code in rows:
        history.setdefault(name, []).append(code)
    nodes = _nodes(status)
    assert set(history) == set(nodes)
    for name, codes in history.items():
        assert nodes[name]["attempts"] == len(codes) == 1
        assert nodes[name]["exit_code"] == int(codes[0]) == 0

    for region in ("us", "br", "de", "jp"):
        for output in ("metrics.json", "train.json"):
            here = json.loads((local / "region-retrain" / "models" / region / output).read_text())
            there = json.loads((workdir / "models" / region / output).read_text())
            here.pop("fit_seconds", None), there.pop("fit_seconds", None)  # a timing, not an output
            assert here == there, (region, output)
    assert (local / "region-retrain" / "reports" / "report.json").read_text() == (
        workdir / "reports" / "report.json"
    ).read_text()


SLEEPERS = """
name: sleepers
matrix:
  region: [us, br]
steps:
  nap:
    command: {py} -c "import time; time.sleep(600)"
    resources: {{memory: 64MB, disk: 10MB}}
  after:
    needs: [nap]
    command: {py} -c "print('never')"
    resources: {{memory: 64MB, disk: 10MB}}
"""


def test_condor_q_recipes_and_cancel_leaves_no_job(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("recipes")
    _pipeline(workdir, SLEEPERS.format(py=PY))
    run_id = _submit(condor_pool, workdir)
    cluster = _dagman_cluster(workdir, run_id)
    condor_pool.wait_until(
        lambda: len(_queue(condor_pool, f"DAGManJobId == {cluster} && JobStatus == 2", "DAGNodeName")) == 2,
        "both nap nodes to run",
    )
    # docs/engines/htcondor.md's recipes.
    tree = condor_pool.run(["condor_q", "-dag", "-nobatch"]).stdout
    assert "|-nap.us" in tree and "|-nap.br" in tree, tree
    # Other runs may share the pool: the recipe's answer holds this run's us node, and only it once
    # narrowed to this run.
    us = _queue(condor_pool, 'DagflowRegion == "us"', "DagflowStep", "DagflowRegion", "DagflowRunId")
    assert ["nap", "us", run_id] in us, us
    assert {row[1] for row in us} == {"us"}, us
    ours = _queue(condor_pool, f'DagflowRegion == "us" && DagflowRunId == "{run_id}"', "DagflowStep", "DagflowRegion")
    assert ours == [["nap", "us"]], ours
    batch = _queue(condor_pool, f"DAGManJobId == {cluster}", "JobBatchName")
    assert batch and all(row == [run_id] for row in batch), batch
    by_run = _queue(condor_pool, f'DagflowRunId == "{run_id}"', "DAGNodeName")
    assert sorted(row[0] for row in by_run) == ["nap.br", "nap.us"]

    done = condor_pool.dagflow(["cancel", run_id, "--json"], cwd=workdir, check=False)
    assert done.returncode in (0, 1), done.stderr
    condor_pool.wait_until(
        lambda: not _queue(condor_pool, f"ClusterId == {cluster} || DAGManJobId == {cluster}", "ClusterId"),
        "the cancelled run's jobs to leave the queue",
    )
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] in ("failed", "interrupted", "stopped"), status["state"]
    assert _nodes(status)["after.us"]["state"] != "succeeded"


FLAKY = """
name: flaky
steps:
  first:
    command: sh -c "echo ran >> first.count"
    resources: {{memory: 64MB, disk: 10MB}}
  second:
    needs: [first]
    command: sh -c "echo ran >> second.count; test -e fixed"
    retries: 1
    resources: {{memory: 64MB, disk: 10MB}}
  third:
    needs: [second]
    command: sh -c "echo ran >> third.count"
    resources: {{memory: 64MB, disk: 10MB}}
"""


def _count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_failed_node_leaves_a_rescue_dag_and_resubmit_finishes_without_rerunning(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("rescue")
    _pipeline(workdir, FLAKY.format())
    run_id = _submit(condor_pool, workdir)
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "failed"
    nodes = _nodes(status)
    assert nodes["first"]["state"] == "succeeded"
    assert nodes["second"]["state"] == "failed" and nodes["second"]["attempts"] == 2
    assert nodes["third"]["state"] == "upstream_failed"
    assert _count(workdir / "second.count") == 2
    assert list((workdir / ".dagflow" / "runs" / run_id / "condor").glob("*.rescue001"))

    (workdir / "fixed").write_text("")
    condor_pool.give(workdir)
    condor_pool.dagflow(["resubmit", run_id], cwd=workdir)
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    assert _count(workdir / "first.count") == 1  # not rerun
    assert _count(workdir / "second.count") == 3
    assert _count(workdir / "third.count") == 1


RETRIES = """
name: retries
steps:
  permanent:
    command: sh -c "echo ran >> permanent.count; exit 3"
    retries: {{count: 3, unless_exit: [3]}}
    resources: {{memory: 64MB, disk: 10MB}}
  transient:
    command: sh -c "echo ran >> transient.count; exit 4"
    retries: {{count: 2, unless_exit: [3]}}
    resources: {{memory: 64MB, disk: 10MB}}
"""


def test_retry_unless_exit_is_honoured_by_dagman(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("retries")
    _pipeline(workdir, RETRIES.format())
    run_id = _submit(condor_pool, workdir)
    dag = next((workdir / ".dagflow" / "runs" / run_id / "condor").glob("*.dag"))
    assert "RETRY permanent 3 UNLESS-EXIT 3" in dag.read_text()
    status = condor_pool.ended(workdir, run_id)
    nodes = _nodes(status)
    assert _count(workdir / "permanent.count") == 1
    assert nodes["permanent"]["attempts"] == 1 and nodes["permanent"]["exit_code"] == 3
    assert _count(workdir / "transient.count") == 3
    assert nodes["transient"]["attempts"] == 3 and nodes["transient"]["exit_code"] == 4
    assert status["state"] == "failed"


GPU_FANOUT = """
name: gpufan
matrix:
  shard: [a, b, c, d]
steps:
  train:
    kind: train
    command: sh -c "echo start $(date +%s.%N) >> {{shard}}.times; sleep 4; echo end $(date +%s.%N) >> {{shard}}.times"
    resources: {{gpus: 1, memory: 64MB, disk: 10MB}}
"""


def test_maxjobs_gpu_keeps_at_most_n_gpu_nodes_running(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("maxjobs")
    _pipeline(workdir, GPU_FANOUT.format())
    run_id = _submit(condor_pool, workdir, "--max-gpu-jobs", "1")
    dag = next((workdir / ".dagflow" / "runs" / run_id / "condor").glob("*.dag"))
    assert "MAXJOBS gpu 1" in dag.read_text()
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    # The pool has two GPUs, so without the throttle two nodes would overlap.
    spans = []
    for shard in "abcd":
        lines = dict(line.split() for line in (workdir / f"{shard}.times").read_text().splitlines())
        spans.append((float(lines["start"]), float(lines["end"])))
    spans.sort()
    for (_, end), (start, _) in pairwise(spans):
        assert start >= end, spans


def test_held_job_shows_its_hold_reason(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("held")
    _pipeline(workdir, SLEEPERS.format(py=PY))
    run_id = _submit(condor_pool, workdir)
    cluster = _dagman_cluster(workdir, run_id)
    jobs = condor_pool.wait_until(
        lambda: _queue(condor_pool, f"DAGManJobId == {cluster} && DAGNodeName == \"nap.us\"", "ClusterId"),
        "nap.us to be queued",
    )
    condor_pool.run(["condor_hold", "-reason", "disk quota audit by ops", jobs[0][0]])  # type: ignore[index]
    held = condor_pool.wait_until(
        lambda: (n := _nodes(condor_pool.status(workdir, run_id))["nap.us"])["state"] == "held" and n,
        "dagflow status to show nap.us held",
    )
    assert "disk quota audit by ops" in (held["why"] or ""), held  # type: ignore[index]
    table = condor_pool.dagflow(["status", run_id], cwd=workdir, check=False, env={"COLUMNS": "250"}).stdout
    assert "disk quota audit by ops" in table
    condor_pool.dagflow(["cancel", run_id], cwd=workdir, check=False)
    condor_pool.wait_until(lambda: not _queue(condor_pool, f"DAGManJobId == {cluster}", "ClusterId"), "cleanup")


def _collect(process: subprocess.Popen[str], lines: list[str]) -> None:
    for line in process.stdout:  # type: ignore[union-attr]
        lines.append(line)


def test_run_engine_condor_prints_an_execute_sides_hold_reason_inert(condor_pool: Pool) -> None:  # #40 item 18
    workdir = condor_pool.workdir("held-run")
    _pipeline(workdir, SLEEPERS.format(py=PY))
    condor_pool.give(workdir)
    argv = [sys.executable, "-m", "dagflow", "run", "--engine", "condor", "pipeline.yaml", "--data-mode", "shared"]
    run = subprocess.Popen(condor_pool._as_user(argv, None), cwd=workdir, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=_collect, args=(run, lines), daemon=True)
    reader.start()
    try:
        records = workdir / ".dagflow" / "runs"
        record = condor_pool.wait_until(
            lambda: next((path for path in records.glob("*/condor/run.json") if _submitted(path)), None),
            "the DAG submitted",
        )
        run_id = record.parent.parent.name  # type: ignore[union-attr]
        cluster = _dagman_cluster(workdir, run_id)
        jobs = condor_pool.wait_until(
            lambda: _queue(condor_pool, f"DAGManJobId == {cluster} && DAGNodeName == \"nap.us\"", "ClusterId"),
            "nap.us to be queued",
        )
        condor_pool.run(["condor_hold", "-reason", "\x1b]0;pwned\x07\x1b[31mquota", jobs[0][0]])  # type: ignore[index]
        # The run's own view polls: cancelling before one of its looks caught the hold would test nothing.
        condor_pool.wait_until(lambda: any("held nap.us" in line for line in lines), "the run to print the hold")
        condor_pool.dagflow(["cancel", run_id], cwd=workdir, check=False)
        run.wait(timeout=600)
        reader.join(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    output = "".join(lines)
    assert "held nap.us" in output and "pwned" in output, output
    assert "\x1b" not in output and "\x07" not in output, repr(output)
    assert "\\x1b]0;pwned\\x07\\x1b[31mquota" in output, output


def test_run_engine_condor_runs_on_the_pool_and_resume_stays_there(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("run-engine")
    _pipeline(workdir, FLAKY.format())
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["run", "--engine", "condor", "pipeline.yaml", "--json", "--data-mode", "shared"],
                               cwd=workdir, check=False)
    assert done.returncode == 1, done.stderr
    status = json.loads(done.stdout)
    run_id = status["run_id"]
    assert status["engine"] == "condor"
    cluster = _dagman_cluster(workdir, run_id)
    assert _history(condor_pool, f"ClusterId == {cluster}", "JobUniverse") == [["7"]]  # DAGMan ran it
    assert _history(condor_pool, f"DAGManJobId == {cluster}", "DAGNodeName")  # and its nodes ran as jobs

    (workdir / "fixed").write_text("")
    condor_pool.give(workdir)
    journal = workdir / ".dagflow" / "runs" / run_id / "journal.jsonl"
    journal_before = journal.read_bytes() if journal.exists() else b""
    done = condor_pool.dagflow(["run", "--resume", run_id, "--json"], cwd=workdir, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["state"] == "succeeded"
    resumed = _dagman_cluster(workdir, run_id)
    assert resumed != cluster  # a second DAGMan job: the rescue DAG ran on the pool
    assert _history(condor_pool, f"DAGManJobId == {resumed}", "DAGNodeName")
    assert _count(workdir / "first.count") == 1
    # The local runner never touched the run: no record of local processes, and the journal (the condor
    # engine's ingest of DAGMan's records) only grew by what the resumed DAG did.
    assert not (journal.parent / "procs.jsonl").exists()
    assert journal.read_bytes().startswith(journal_before)
