"""A condor run's ingest (engines/condor/ingest.py): DAGMan's files folded into the run's journal, usage and kept
status, repeatably; a status read writes nothing, and reads the same from a run directory made read-only."""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.condor.ingest import ingest_condor
from dagflow.engines.condor.observe import read_condor_status
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from tests.condor_helpers import utc  # noqa: F401 (an autouse fixture)
from tests.run_dir_support import entries, read_only
from tests.test_status_cache import json_of, make_run, text_of


def _views(layout: RunLayout) -> tuple[str, str, dict]:
    status = read_condor_status(layout)
    return text_of(status, show_all=True), json_of(status), status.to_dict()


def test_ingest_journals_what_dagmans_files_say_once(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    assert read_journal(layout.journal_path).runners == 0  # nothing journaled before an ingest
    ingested = ingest_condor(layout)
    assert ingested is not None
    journal = read_journal(layout.journal_path)
    assert (journal.runners, journal.finished, journal.bad_lines) == (1, "failed", 0)
    states = {name: record.state for name, record in journal.nodes.items()}
    assert states == ingested.node_states() == {
        "fetch.us": "succeeded", "fetch.br": "succeeded", "train.us": "failed", "train.br": "failed",
        "report": "upstream_failed",
    }  # fmt: skip
    assert journal.nodes["train.us"].attempts == 3 == ingested.record("train.us").attempts
    assert journal.nodes["train.us"].rc == 1 and journal.nodes["report"].why == "upstream train.us failed"
    assert journal.nodes["fetch.us"].started == ingested.record("fetch.us").started
    files = entries(layout.run_dir)
    assert ingest_condor(layout) is None  # nothing new: nothing read, nothing written
    assert entries(layout.run_dir) == files


def test_a_status_read_writes_nothing_and_reads_the_same_read_only(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    files = entries(layout.run_dir)
    _views(layout)  # not ingested: read from DAGMan's files, nothing kept (nor usage recorded)
    assert entries(layout.run_dir) == files
    ingest_condor(layout)
    files = entries(layout.run_dir)
    views = _views(layout)
    assert entries(layout.run_dir) == files
    with read_only(layout.run_dir):
        assert _views(layout) == views  # the kept status: the change times chmod set do not matter
        assert entries(layout.run_dir) == files
