"""`dagflow status` for condor runs, from hand-written DAGMan/HTCondor files (tests/data/condor/).

The files follow the formats in the HTCondor manual: the job event log (000 submit with the
`DAG Node:` note, 001 execute, 004 evicted, 005 terminated with a non-zero return value, 006 image
size, 009 aborted, 012 held with a reason and code, 013 released), the node status file (DagStatus,
NodeStatus and StatusEnd ads) and the jobstate log. htcondor2.JobEventLog and classad2.parseAds read
them (proof that the formats are right), and dagflow's fast readers must agree with the bindings.

`failed/` is a run whose DAGMan finished with exit 1: fetch.us ran once; fetch.br was held (memory),
released, evicted and then succeeded; train.us failed all 3 attempts (RETRY 2) with exit code 1;
train.br was held (HoldReasonCode 47) and removed by periodic_remove; report is futile.
`running/` is the same run at 14:04:35, before train.br was removed (its logs cut at that time, its
node status file the 14:03:20 snapshot).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import classad2
import htcondor2
import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor import events, jobstate, status_files
from dagflow.engines.condor.engine import prepare_condor
from dagflow.engines.condor.observe import read_condor_status
from dagflow.run.status import read_run_status, run_engine
from tests.condor_helpers import regional_plan

DATA = Path(__file__).parent / "data" / "condor"
TRAIN_STDERR = (
    'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\nValueError: lr must be > 0\n'
)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch):
    """Event log times are local time; the hand-written files assume UTC."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def make_run(runs_dir: Path, scenario: str, submitted: bool = True, files: bool = True):  # -> Prepared
    plan = regional_plan()
    plan.run_id = scenario
    prepared = prepare_condor(plan, runs_dir)
    if files:
        for path in (DATA / scenario).iterdir():
            shutil.copy(path, prepared.dag.parent / path.name)
    if submitted:
        prepared.record.add_submission(prepared.layout.run_dir, 100)
    (prepared.layout.logs_dir / "train.us.err").write_text(TRAIN_STDERR)
    return prepared


# --- the formats: the bindings read the hand-written files --------------------------------------------------


@pytest.mark.parametrize("scenario", ["running", "failed"])
def test_jobeventlog_reads_the_hand_written_event_log(scenario: str) -> None:
    log = htcondor2.JobEventLog(str(DATA / scenario / "dagflow.jobs.log"))
    seen = list(log.events(0))
    kinds = {int(event.type) for event in seen}
    assert {0, 1, 4, 5, 6, 12, 13} <= kinds
    submits = [event for event in seen if event.type == htcondor2.JobEventType.SUBMIT]
    assert {str(event["LogNotes"]) for event in submits} >= {"DAG Node: fetch.us", "DAG Node: train.br"}
    # DAGMan's note is also read as the structured DAGNodeName attribute.
    assert all(event["StructuredNotes"]["DAGNodeName"] for event in submits)
    held = [event for event in seen if event.type == htcondor2.JobEventType.JOB_HELD]
    assert [(event.cluster, event["HoldReasonCode"]) for event in held] == [(102, 34), (106, 47)]
    assert "cgroup memory limit" in held[0]["HoldReason"]
    failures = [e for e in seen if e.type == htcondor2.JobEventType.JOB_TERMINATED and e["ReturnValue"] != 0]
    assert [event.cluster for event in failures] == [103, 105, 107]
    if scenario == "failed":
        aborted = [event for event in seen if event.type == htcondor2.JobEventType.JOB_ABORTED]
        assert aborted[0].cluster == 106 and "PeriodicRemove" in aborted[0]["Reason"]


@pytest.mark.parametrize("scenario", ["running", "failed"])
def test_fast_event_scan_agrees_with_jobeventlog(scenario: str) -> None:
    path = DATA / scenario / "dagflow.jobs.log"
    assert events.read_events(path) == events.read_events_with_bindings(path)


def test_event_scan_facts() -> None:
    jobs = events.read_events(DATA / "failed" / "dagflow.jobs.log")
    assert jobs["fetch.br"].state == events.EXITED and jobs["fetch.br"].exit_code == 0
    assert (jobs["fetch.br"].holds, jobs["fetch.br"].evictions, jobs["fetch.br"].hold_code) == (1, 1, 34)
    assert (jobs["train.us"].cluster, jobs["train.us"].jobs, jobs["train.us"].exit_code) == (107, 3, 1)
    assert jobs["train.br"].state == events.REMOVED and jobs["train.br"].hold_code == 47
    assert "report" not in jobs


def test_event_scan_of_generated_logs_agrees_with_jobeventlog(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from status import write_files  # benchmarks/status.py's generator
    finally:
        sys.path.pop(0)
    status_path, log_path, js_path = write_files(tmp_path, 600)
    jobs = events.read_events(log_path)
    assert len(jobs) == 600 and jobs == events.read_events_with_bindings(log_path)
    data = status_path.read_bytes()
    assert status_files.parse_node_status(data).nodes == status_files.parse_node_status_with_classad(data)
    assert len(jobstate.read_jobstate(js_path).nodes) == 600  # type: ignore[union-attr]


def test_an_event_log_in_the_old_date_format_and_without_dag_nodes(tmp_path: Path) -> None:
    path = tmp_path / "old.log"
    path.write_text(
        "000 (7.000.000) 03/01 14:00:05 Job submitted from host: <10.0.0.5:9618>\n...\n"
        "001 (7.000.000) 03/01 14:00:06 Job executing on host: <10.0.0.6:9618>\n...\n"
        "000 (8.000.000) 03/01 14:00:05 Job submitted from host: <10.0.0.5:9618>\n    DAG Node: a\n...\n"
        "005 (8.000.000) 03/01 14:01:05 Job terminated.\n\t(0) Abnormal termination (signal 9)\n"
        "\t(0) No core file\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Remote Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
        "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n"
        "\t0  -  Total Bytes Sent By Job\n\t0  -  Total Bytes Received By Job\n...\n"
    )
    jobs = events.read_events(path)
    assert list(jobs) == ["a"] and jobs["a"].signal == 9 and jobs["a"].exit_code is None
    assert jobs == events.read_events_with_bindings(path)


@pytest.mark.parametrize("scenario", ["running", "failed"])
def test_node_status_file_reads_as_classads(scenario: str) -> None:
    data = (DATA / scenario / "ratings.status").read_bytes()
    ads = list(classad2.parseAds(data.decode()))
    assert [ad["Type"] for ad in ads] == ["DagStatus"] + ["NodeStatus"] * 5 + ["StatusEnd"]
    parsed = status_files.parse_node_status(data)
    assert parsed.nodes == status_files.parse_node_status_with_classad(data)
    assert parsed.complete and parsed.timestamp == ads[0]["Timestamp"]
    assert parsed.dag_status == (status_files.SUBMITTED if scenario == "running" else status_files.ERROR)


def test_node_status_file_written_differently_falls_back_to_classad2() -> None:
    data = (DATA / "failed" / "ratings.status").read_bytes()
    reordered = data.replace(b"  RetryCount = 2;\n", b"").replace(
        b'  Node = "train.us";\n', b'  RetryCount = 2;\n  Node = "train.us";\n'
    )
    parsed = status_files.parse_node_status(reordered)
    assert parsed.nodes == status_files.parse_node_status(data).nodes
    assert parsed.nodes["train.us"].retry_count == 2


def test_jobstate_log() -> None:
    log = jobstate.read_jobstate(DATA / "failed" / "ratings.jobstate.log")
    assert log is not None
    assert log.dagman_ids == ["100.0"] and log.exit_code == 1 and not log.dagman_running
    assert (log.nodes["train.us"].attempt, log.nodes["train.us"].event, log.nodes["train.us"].exit_code) == (
        3,
        "JOB_FAILURE",
        1,
    )
    assert log.nodes["fetch.br"].event == "JOB_SUCCESS"  # the IMAGE_SIZE line does not replace it
    assert log.nodes["train.br"].event == "JOB_ABORTED"
    running = jobstate.read_jobstate(DATA / "running" / "ratings.jobstate.log")
    assert running is not None and running.dagman_running and running.nodes["train.br"].event == "JOB_HELD"


# --- the status built from them ------------------------------------------------------------------------------


def test_status_of_a_running_dag(tmp_path: Path) -> None:
    status = read_condor_status(make_run(tmp_path, "running").layout)
    assert status.state == "running" and status.engine == "condor"
    assert status.node_states() == {
        "fetch.us": "succeeded",
        "fetch.br": "succeeded",
        "train.us": "failed",  # newer than the status file's "running": the jobstate log's JOB_FAILURE, 3rd attempt
        "train.br": "held",
        "report": "pending",
    }
    assert status.record("train.us").attempts == 3 and status.record("train.us").rc == 1
    assert status.record("train.br").why.startswith("held: The job exceeded allowed execute duration")  # type: ignore[union-attr]
    assert status.extra["held"]["train.br"]["code"] == 47
    assert status.progress()["region"] == {
        "us": {"done": 1, "failed": 1, "total": 2},
        "br": {"done": 1, "failed": 0, "total": 2},
    }
    assert status.failed_stderr() == {"train.us": TRAIN_STDERR.splitlines()}


def test_status_of_a_failed_dag(tmp_path: Path) -> None:
    status = read_condor_status(make_run(tmp_path, "failed").layout)
    assert status.state == "failed" and status.journal.finished_at == 1740837885
    assert status.counts() == {"succeeded": 2, "failed": 2, "upstream_failed": 1}
    assert status.record("train.br").why.startswith("removed: The job attribute PeriodicRemove")  # type: ignore[union-attr]
    assert status.record("fetch.br").attempts == 1
    assert status.resume_hint == "dagflow resubmit failed"


def test_a_retry_in_progress_is_retrying(tmp_path: Path) -> None:
    prepared = make_run(tmp_path, "running")
    log = prepared.dag.parent / "ratings.jobstate.log"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text(
        "".join(line for line in lines if "107.0" not in line and "train.us JOB_FAILURE 1 - - 3" not in line)
    )
    events_log = prepared.dag.parent / "dagflow.jobs.log"
    text = events_log.read_text()
    events_log.write_text(text[: text.index("000 (106.000.000)")])
    (prepared.dag.parent / "ratings.status").unlink()  # its snapshot already shows the third attempt
    status = read_condor_status(prepared.layout)
    assert status.node_states()["train.us"] == "retrying" and status.record("train.us").attempts == 2


def test_submitted_but_dagman_not_started_yet(tmp_path: Path) -> None:
    status = read_condor_status(make_run(tmp_path, "queued", files=False).layout)
    assert status.state == "running" and set(status.node_states().values()) == {"pending"}
    assert status.extra["dagman_state"] == "submitted"


def test_a_cancelled_dag_is_interrupted(tmp_path: Path) -> None:
    prepared = make_run(tmp_path, "running")
    condor = prepared.dag.parent
    with open(condor / "ratings.dag.dagman.log", "a") as log:
        log.write("009 (100.000.000) 2025-03-01 14:04:50 Job was aborted.\n\tvia condor_rm (by user alice)\n...\n")
    with open(condor / "dagflow.jobs.log", "a") as log:
        log.write("009 (106.000.000) 2025-03-01 14:04:50 Job was aborted.\n\tvia condor_rm (by user alice)\n...\n")
    status = read_condor_status(prepared.layout)
    assert status.state == "interrupted"
    assert status.node_states()["train.br"] == "interrupted"


def test_dagflow_status_dispatches_on_the_engine(tmp_path: Path) -> None:
    prepared = make_run(tmp_path, "failed")
    assert run_engine(prepared.layout) == "condor"
    assert read_run_status(prepared.layout).engine == "condor"
    runs = str(tmp_path)
    result = CliRunner().invoke(app, ["status", "failed", "--runs-dir", runs, "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["engine"] == "condor" and summary["state"] == "failed"
    assert summary["condor"]["dagman_job"] == "100.0"
    assert summary["failed_stderr"]["train.us"][-1] == "ValueError: lr must be > 0"
    nodes = {node["node"]: node for node in summary["nodes"]}
    assert nodes["train.us"]["attempts"] == 3 and nodes["train.us"]["exit_code"] == 1
    text = CliRunner().invoke(app, ["status", "failed", "--runs-dir", runs]).stdout
    for expected in ("DAGMan job 100.0", "region", "us 1/2", "stderr of train.us", "dagflow resubmit failed"):
        assert expected in text, text


def test_watch_stops_when_the_run_is_not_running(tmp_path: Path) -> None:
    make_run(tmp_path, "failed")
    result = CliRunner().invoke(app, ["status", "failed", "--runs-dir", str(tmp_path), "--watch", "--interval", "0.2"])
    assert result.exit_code == 0 and "upstream-failed" in result.stdout


def test_a_local_run_still_reads_as_local(tmp_path: Path) -> None:
    plan = regional_plan()
    from dagflow.run.layout import RunLayout

    layout = RunLayout(tmp_path, plan.run_id)
    layout.create(plan)
    assert run_engine(layout) == "local" and read_run_status(layout).state == "not-started"
    assert os.path.isdir(layout.logs_dir)
