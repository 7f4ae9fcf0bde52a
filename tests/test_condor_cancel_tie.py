"""`dagflow status` of a condor run cancelled in the same second as DAGMan submitted node jobs (#28 item 8b).

The recorded files (tests/data/condor/cancelled-same-second/) are those of a run whose DAGMan started
at 14:00:02 and submitted fetch.us and fetch.br at 14:00:05; `dagflow cancel` removed the DAGMan job in
that same second. The jobstate log, the job event logs and DAGMan's own log all write whole seconds, so
the cancel record (run.json's `removed`) and the nodes' SUBMIT lines carry the same second: the cancel
must win that tie, as the schedd removes every node job of a removed DAGMan. fetch.us's removal is in the
nodes' event log (same second again); fetch.br's is not logged yet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from condor_runs import prepare_condor

from dagflow.engines.condor.ingest import observe_condor as read_condor_status  # status ingests, then reads
from dagflow.engines.condor.records import CondorRecord
from dagflow.run.layout import RunLayout
from tests.condor_helpers import regional_plan, utc  # noqa: F401 (utc: an autouse fixture)

DATA = Path(__file__).parent / "data" / "condor" / "cancelled-same-second"
SUBMITTED_AT = 1740837605  # 2025-03-01 14:00:05 UTC: both SUBMIT lines of the jobstate log


def cancelled_run(runs_dir: Path, removed: float) -> RunLayout:
    """The recorded run, with run.json saying `dagflow cancel` removed its DAGMan job 100 at `removed`."""
    plan = regional_plan()
    plan.run_id = "cancelled-same-second"
    prepared = prepare_condor(plan, runs_dir)
    for path in DATA.iterdir():
        shutil.copy(path, prepared.dag.parent / path.name)
    record = prepared.record
    record.add_submission(prepared.layout.run_dir, 100)
    record.submissions[-1].t = 1740837600.0
    record.submissions[-1].removed = removed
    record.save(prepared.layout.run_dir)
    return prepared.layout


@pytest.mark.parametrize("removed", [float(SUBMITTED_AT), SUBMITTED_AT + 0.4], ids=["equal", "same-second"])
def test_nodes_submitted_in_the_second_of_the_cancel_are_interrupted(tmp_path: Path, removed: float) -> None:
    layout = cancelled_run(tmp_path, removed)
    assert CondorRecord.load(layout.run_dir).latest.removed == removed  # type: ignore[union-attr]
    status = read_condor_status(layout)
    assert status.state == "interrupted"
    assert status.node_states() == {
        "fetch.us": "interrupted",
        "fetch.br": "interrupted",
        "train.us": "pending",
        "train.br": "pending",
        "report": "pending",
    }
    assert status.record("fetch.us").why == "removed: DAG Removed"


def test_dagflow_status_shows_them_interrupted(tmp_path: Path) -> None:
    layout = cancelled_run(tmp_path, SUBMITTED_AT + 0.4)
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "status", layout.run_id, "--runs-dir", str(tmp_path), "--json"],
        capture_output=True, text=True, env={**os.environ, "TZ": "UTC"}, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["state"] == "interrupted"
    states = {node["node"]: node["state"] for node in summary["nodes"]}
    assert (states["fetch.us"], states["fetch.br"]) == ("interrupted", "interrupted")
