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
from pathlib import Path

import classad2
import htcondor2
import pytest
from condor_runs import prepare_condor
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor import event_log as events
from dagflow.engines.condor import jobstate, status_files
from dagflow.engines.condor.ingest import observe_condor as read_condor_status  # status ingests, then reads
from dagflow.engines.registry import engine_of_run, read_run_status
from tests.condor_helpers import regional_plan, utc  # noqa: F401 (utc: an autouse fixture)

DATA = Path(__file__).parent / "data" / "condor"
TRAIN_STDERR = (
    'Traceback (most recent call last):\n  File "train.py", line 40, in <module>\nValueError: lr must be > 0\n'
)


def _jobs(path: Path) -> dict[str, events.NodeJob]:
    return events.node_jobs(events.read_events(path))


def _jobs_by_bindings(path: Path) -> dict[str, events.NodeJob]:
    """The same fold over htcondor2.JobEventLog's events (whose every event the text reader must read alike)."""
    assert list(events.read_events(path)) == list(events.bindings_events(path))
    return events.node_jobs(events.bindings_events(path))


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
    assert _jobs(path) == _jobs_by_bindings(path)


def test_event_scan_facts() -> None:
    jobs = _jobs(DATA / "failed" / "dagflow.jobs.log")
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
    jobs = _jobs(log_path)
    assert len(jobs) == 600 and jobs == _jobs_by_bindings(log_path)
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
    jobs = _jobs(path)
    assert list(jobs) == ["a"] and jobs["a"].signal == 9 and jobs["a"].exit_code is None
    assert jobs == _jobs_by_bindings(path)


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
    assert engine_of_run(prepared.layout) == "condor"
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
    assert engine_of_run(layout) == "local" and read_run_status(layout).state == "not-started"
    assert os.path.isdir(layout.logs_dir)


# --- files written by a real pool (tests/data/condor-pool/, HTCondor 25.14) ------------------------------------

POOL = Path(__file__).parent / "data" / "condor-pool"
STAGES = ["stage.us", "stage.br", "stage.de", "stage.jp"]


def pool_run(runs_dir: Path, files: tuple[str, ...], cluster: int = 2):  # -> Prepared
    """A run directory holding pool-written files; `cluster` is the DAGMan job that wrote them (the
    jobstate log's DAGMAN_STARTED 2.0, the strict dagman.out fixture's batch-id 100)."""
    from dagflow.plan.expand import expand
    from dagflow.spec import load_spec

    plan = expand(load_spec(Path(__file__).resolve().parents[1] / "examples" / "region-retrain" / "pipeline.yaml"))
    plan.run_id = "pool"
    prepared = prepare_condor(plan, runs_dir)
    for name in files:
        shutil.copy(POOL / name, prepared.dag.parent / name.replace("region-retrain-strict", "region-retrain"))
    prepared.record.add_submission(prepared.layout.run_dir, cluster)
    return prepared


def test_the_pool_written_node_status_file_is_read_on_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (POOL / "region-retrain.status").read_bytes()
    reference = status_files.parse_node_status_with_classad(data)
    monkeypatch.setattr(status_files, "parse_node_status_with_classad", None)  # the fallback must not run
    monkeypatch.setattr(status_files.classad2, "parseAds", None)
    parsed = status_files.parse_node_status(data)
    assert parsed.nodes == reference and len(parsed.nodes) == 13
    assert parsed.dag_status == status_files.ERROR and parsed.complete and parsed.timestamp == 1795484671
    assert parsed.nodes["stage.us"] == status_files.NodeStatusAd(
        status_files.ERROR, "Job proc (12.0.0) failed with status 127 (after 2 node retries)", 2, 0, 0
    )
    assert {parsed.nodes[name].status for name in parsed.nodes if name not in STAGES} == {status_files.FUTILE}


def test_node_status_ads_in_any_order_with_comments_and_escapes_stay_on_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = (POOL / "region-retrain.status").read_bytes()
    odd = data.replace(
        b'  Node = "stage.us";\n  NodeStatus = 6; /* "STATUS_ERROR" */\n',
        b'  NodeStatus = 3; /* "STATUS_SUBMITTED" */\n\n  Node = "stage.us"; /* moved */\n',
    ).replace(b'"Had an ancestor node fail";\n  RetryCount = 0;', b'"said \\"no\\" /* not a comment */";\n')
    reference = status_files.parse_node_status_with_classad(odd)
    monkeypatch.setattr(status_files.classad2, "parseAds", None)
    nodes = status_files.parse_node_status(odd).nodes
    assert nodes == reference
    assert nodes["stage.us"] == status_files.NodeStatusAd(3, nodes["stage.us"].details, 2, 0, 0)
    assert nodes["report"].details == 'said "no" /* not a comment */' and nodes["report"].retry_count == 0


def test_node_status_ads_the_fast_path_cannot_read_fall_back_to_classad2() -> None:
    data = (POOL / "region-retrain.status").read_bytes()
    expression = data.replace(b"  RetryCount = 2;\n", b"  RetryCount = 1 + 1;\n", 1)  # one ad, read by classad2
    assert status_files.parse_node_status(expression).nodes == status_files.parse_node_status(data).nodes
    one_line = data.replace(b";\n  ", b"; ")  # no ad in DAGMan's line layout: the whole file by classad2
    parsed = status_files.parse_node_status(one_line)
    assert parsed.nodes == status_files.parse_node_status(data).nodes and len(parsed.nodes) == 13


def test_the_pool_written_jobstate_log_counts_attempts_per_node() -> None:
    log = jobstate.read_jobstate(POOL / "region-retrain.jobstate.log")
    assert log is not None and log.exit_code == 1 and not log.dagman_running and log.dagman_ids == ["2.0"]
    assert sorted(log.nodes) == sorted(STAGES)  # the other 9 nodes never ran
    for name in STAGES:
        node = log.nodes[name]
        assert (node.attempt, node.run_attempts, node.event, node.exit_code) == (3, 3, "JOB_FAILURE", 127), name
        assert node.started is not None and node.ended is not None
    # Its last attempt's lines carry the DAG-wide sequence number of that submission: 10 for stage.us.
    assert log.nodes["stage.us"].started == 1795484666 and log.nodes["stage.jp"].started == 1795484667


def test_status_of_the_pool_written_failed_run(tmp_path: Path) -> None:
    prepared = pool_run(tmp_path, ("region-retrain.status", "region-retrain.jobstate.log"))
    status = read_condor_status(prepared.layout)
    assert status.state == "failed" and status.counts() == {"failed": 4, "upstream_failed": 9}
    for name in STAGES:
        record = status.record(name)
        assert (record.attempts, record.rc, record.why) == (3, 127, "exit code 127"), name
    never_ran = [name for name in status.plan.nodes if name not in STAGES]
    assert len(never_ran) == 9 and all(status.record(name).attempts == 0 for name in never_ran)


def test_a_retry_in_a_rescue_run_counts_from_that_run(tmp_path: Path) -> None:
    prepared = pool_run(tmp_path, ("region-retrain.jobstate.log",))
    with open(prepared.dag.parent / "region-retrain.jobstate.log", "a") as log:
        log.write(
            "1795484700 INTERNAL *** DAGMAN_STARTED 20.0 ***\n"
            "1795484701 stage.us SUBMIT 21.0 - - 1\n1795484702 stage.us EXECUTE 21.0 - - 1\n"
            "1795484703 stage.us JOB_TERMINATED 21.0 - - 1\n1795484703 stage.us JOB_FAILURE 127 - - 1\n"
        )
    history = jobstate.read_jobstate(prepared.dag.parent / "region-retrain.jobstate.log")
    assert history is not None and history.dagman_running
    assert (history.nodes["stage.us"].attempt, history.nodes["stage.us"].run_attempts) == (4, 1)
    assert history.nodes["stage.us"].started == 1795484702  # not the first run's sequence number 1
    assert (history.nodes["stage.br"].attempt, history.nodes["stage.br"].run_attempts) == (3, 0)
    prepared.record.add_submission(prepared.layout.run_dir, 20, rescue=1)
    status = read_condor_status(prepared.layout)
    assert status.state == "running" and status.node_states()["stage.us"] == "retrying"
    assert status.record("stage.us").attempts == 4


def test_dagman_that_aborts_before_running_anything_says_why(tmp_path: Path) -> None:
    prepared = pool_run(tmp_path, ("region-retrain-strict.dag.dagman.out",), cluster=100)
    status = read_condor_status(prepared.layout)
    assert status.state == "failed" and set(status.node_states().values()) == {"pending"}
    assert status.extra["dagman_exit_code"] == 1
    assert status.extra["dagman_reason"] == (
        "Warning: default node log file /tmp/x/condor/region-retrain.dag.nodes.log is in /tmp; "
        "ERROR: Warning is fatal error because of DAGMAN_USE_STRICT setting"
    )
    runs = str(tmp_path)
    summary = json.loads(CliRunner().invoke(app, ["status", "pool", "--runs-dir", runs, "--json"]).stdout)
    assert summary["state"] == "failed" and "DAGMAN_USE_STRICT" in summary["condor"]["dagman_reason"]
    text = CliRunner().invoke(app, ["status", "pool", "--runs-dir", runs]).stdout
    assert text.index("failed") < text.index("DAGMan: Warning: default node log file") < text.index("pending 13"), text
    assert "exited with status 1" in text


def test_a_dagman_out_of_an_earlier_submission_is_not_this_runs_exit(tmp_path: Path) -> None:
    prepared = pool_run(tmp_path, ("region-retrain-strict.dag.dagman.out",), cluster=100)
    prepared.record.add_submission(prepared.layout.run_dir, 101)  # resubmitted; its DAGMan has not started
    status = read_condor_status(prepared.layout)
    assert status.state == "running" and status.extra["dagman_reason"] is None
