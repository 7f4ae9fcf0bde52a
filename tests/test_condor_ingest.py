"""A condor run's ingest (engines/condor/ingest.py): DAGMan's files folded into the run's journal, usage and
observed record, repeatably; a status read writes nothing, reads the run directory as every engine's is
read (run/status.py), and reads the same from a run directory made read-only."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dagflow.engines.condor import observe
from dagflow.engines.condor.engine import CondorEngine
from dagflow.engines.condor.ingest import ingest_condor
from dagflow.engines.registry import engine_for_run, read_run_status
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.observed import OBSERVED_FILE, read_observed
from dagflow.run.status import read_status
from dagflow.search.scheduler_observe import never_started
from tests.condor_helpers import utc  # noqa: F401 (an autouse fixture)
from tests.run_dir_support import entries, read_only
from tests.test_condor_ingest_again import json_of, make_run, text_of

FAILED_STATES = {
    "fetch.us": "succeeded", "fetch.br": "succeeded", "train.us": "failed", "train.br": "failed",
    "report": "upstream_failed",
}  # fmt: skip


def _views(layout: RunLayout) -> tuple[str, str, dict]:
    status = engine_for_run(layout).read_status(layout)
    return text_of(status, show_all=True), json_of(status), status.to_dict()


def test_ingest_journals_what_dagmans_files_say_once(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    assert read_journal(layout.journal_path).runners == 0  # nothing journaled before an ingest
    assert ingest_condor(layout)
    journal = read_journal(layout.journal_path)
    assert (journal.runners, journal.finished, journal.bad_lines) == (1, "failed", 0)
    assert {name: record.state for name, record in journal.nodes.items()} == FAILED_STATES
    assert read_status(layout, index=True).node_states() == FAILED_STATES
    seen = observe.observe_files(layout, observe.condor_record(layout), read_status(layout, index=True).index)
    assert journal.nodes["train.us"].attempts == 3 == seen.nodes["train.us"].attempts
    assert journal.nodes["train.us"].rc == 1 and journal.nodes["report"].why == "upstream train.us failed"
    assert journal.nodes["fetch.us"].started == seen.nodes["fetch.us"].started
    files = entries(layout.run_dir)
    assert not ingest_condor(layout)  # nothing new: nothing read, nothing written
    assert entries(layout.run_dir) == files


def test_status_reads_the_run_directory_only_and_the_same_read_only(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    files = entries(layout.run_dir)
    assert _views(layout)[2]["state"] == "not-started"  # not ingested: DAGMan's files are not read
    assert entries(layout.run_dir) == files
    ingest_condor(layout)
    files = entries(layout.run_dir)
    views = _views(layout)
    assert views[2]["state"] == "failed" and views[2]["condor"]["dagman_job"] == "100.0"
    assert entries(layout.run_dir) == files
    with read_only(layout.run_dir):
        assert _views(layout) == views  # the change times chmod set do not matter
        assert entries(layout.run_dir) == files


def test_what_the_journal_cannot_say_is_observed_beside_it(tmp_path: Path) -> None:
    """A held job is no journal state: its node shows held, with the hold's reason, from the observed record;
    the journal has nothing of it."""
    layout = make_run(tmp_path, "running")
    ingest_condor(layout)
    assert "train.br" not in read_journal(layout.journal_path).nodes
    status = read_status(layout, index=True)
    assert status.state == "running" and status.node_states()["train.br"] == "held"
    assert status.record("train.br").why.startswith("held: The job exceeded allowed execute duration")
    (layout.run_dir / OBSERVED_FILE).unlink()
    assert read_status(layout, index=True).node_states()["train.br"] == "pending"  # the journal alone


def test_a_search_sees_a_submitted_trial_that_was_never_ingested_as_started(tmp_path: Path) -> None:
    """A scheduler restarted before it marked a condor trial submitted asks whether the run ever started:
    DAGMan runs it, so it did (a `never started` would submit the DAG a second time)."""
    layout = make_run(tmp_path, "running")
    assert never_started(layout.run_dir) is False


def test_the_status_warmer_ingests_a_submission_as_it_starts(tmp_path: Path) -> None:
    """What reads the run directory without ingesting it (`dagflow runs`) sees a submitted run running, not
    only once its DAG has ended."""
    layout = make_run(tmp_path, "running")
    argv = [sys.executable, "-c", "import sys; from dagflow.engines.condor import status_warmer as w; "
            "w.FOLLOW_S = 0.2; sys.exit(w.main(sys.argv[1:]))", str(layout.run_dir), "100"]  # fmt: skip
    warmer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300  # a safety net: under load a warmer starts in seconds
        while read_observed(layout.run_dir) is None and warmer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert read_run_status(layout).state == "running"
    finally:
        os.killpg(warmer.pid, signal.SIGKILL)
        out, _ = warmer.communicate(timeout=60)
    assert b"Traceback" not in out


def test_a_run_is_live_as_dagmans_files_say_now(tmp_path: Path) -> None:
    """The live-run rule asks before anything ingests: a run never ingested whose DAGMan runs is live, and
    one whose last ingest saw DAGMan alive, with files changed since (it ended), is not."""
    engine = CondorEngine(tmp_path)
    live = engine.live(make_run(tmp_path / "a", "running"))
    assert live is not None and live.driver == "DAGMan job 100.0" and "train.br" in live.running
    layout = make_run(tmp_path / "b", "failed")  # another runs dir: the live one above refuses its nodes
    ingest_condor(layout)
    seen = read_observed(layout.run_dir)
    assert seen is not None and engine.live(layout) is None
    seen.alive, seen.key = True, {}  # what an ingest saw while DAGMan ran
    seen.write(layout.run_dir)
    assert read_status(layout, index=True).state == "running" and engine.live(layout) is None
