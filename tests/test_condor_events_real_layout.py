"""The job event log as HTCondor 25 writes it (tests/data/condor-pool/, written by the test pool): the
submit event names the DAG node in a ClassAd note, `[ DAGNodeName = "stage.us"; JobBatchName = ... ]`,
not the older `DAG Node: stage.us` line. Reading only the old form left every node `pending` in
`dagflow status` while condor_q showed its job idle or running."""

from __future__ import annotations

from pathlib import Path

import htcondor2

from dagflow.engines.condor import event_log as events

LOG = Path(__file__).parent / "data" / "condor-pool" / "region-retrain.dag.nodes.log"


def test_scan_finds_every_node_of_a_pool_written_log() -> None:
    jobs = events.node_jobs(events.read_events(LOG))
    # That run: each stage node failed three times (RETRY 2) with exit 127; nothing else was submitted.
    assert sorted(jobs) == ["stage.br", "stage.de", "stage.jp", "stage.us"]
    for job in jobs.values():
        assert (job.jobs, job.state, job.exit_code) == (3, events.EXITED, 127)


def test_scan_agrees_with_htcondor_reader_on_the_node_of_each_job() -> None:
    node_of: dict[int, str] = {}
    for event in htcondor2.JobEventLog(str(LOG)).events(stop_after=0):
        if event.type == htcondor2.JobEventType.SUBMIT:
            node_of[event.cluster] = str(event["StructuredNotes"]["DAGNodeName"])
    jobs = events.node_jobs(events.read_events(LOG))
    latest = {node: max(c for c, n in node_of.items() if n == node) for node in set(node_of.values())}
    assert {name: job.cluster for name, job in jobs.items()} == latest


def test_bindings_reader_and_scan_agree_on_a_pool_written_log() -> None:
    assert list(events.read_events(LOG)) == list(events.bindings_events(LOG))
    assert events.node_jobs(events.bindings_events(LOG)) == events.node_jobs(events.read_events(LOG))
