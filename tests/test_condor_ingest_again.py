"""`dagflow status` of a condor run ingested again (engines/condor/ingest.py, run/observed.py, plan/index.py):
a repeated status reads none of DAGMan's files, and what an earlier ingest left never makes status wrong.
Whatever happened to the files since (appended, rewritten, removed), to the observed record (damaged, of
another run, written by a status running beside), status shows what a first ingest of the files shows."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from condor_runs import prepare_condor
from rich.console import Console

from dagflow.engines.condor import ingest, observe
from dagflow.engines.condor.ingest import observe_condor as read_condor_status  # status ingests, then reads
from dagflow.engines.registry import read_run_status
from dagflow.plan.index import PlanIndex
from dagflow.run import status as run_status
from dagflow.run.journal import FAILED, UPSTREAM_FAILED, JournalState, NodeRecord
from dagflow.run.layout import RunLayout, RunNotFoundError
from dagflow.run.observed import OBSERVED_FILE
from dagflow.run.status import RunStatus, load_plan_index, plan_index_path
from dagflow.run.status_view import print_status
from dagflow.run.usage import NodeUsage, record_usage
from tests.condor_helpers import regional_plan, utc  # noqa: F401 (utc: an autouse fixture)

DATA = Path(__file__).parent / "data" / "condor"
ROOT = Path(__file__).resolve().parents[1]


def make_run(runs_dir: Path, scenario: str, run_id: str | None = None) -> RunLayout:
    plan = regional_plan()
    plan.run_id = run_id or scenario
    prepared = prepare_condor(plan, runs_dir)
    for path in (DATA / scenario).iterdir():
        shutil.copy(path, prepared.dag.parent / path.name)
    prepared.record.add_submission(prepared.layout.run_dir, 100)
    (prepared.layout.logs_dir / "train.us.err").write_text("Traceback (most recent call last):\nValueError: lr\n")
    return prepared.layout


def text_of(status: RunStatus, show_all: bool = False) -> str:
    buffer = io.StringIO()
    print_status(status, show_all, console=Console(file=buffer, width=200))
    return buffer.getvalue()


def json_of(status: RunStatus) -> str:
    out = io.BytesIO()
    status.write_json(out)
    return out.getvalue().decode()


def fresh(layout: RunLayout) -> tuple[str, str, str, dict]:
    """The status of a first ingest of the files: no journal, observed record nor plan index before it."""
    kept = [layout.journal_path, layout.run_dir / OBSERVED_FILE, plan_index_path(layout)]
    saved = {path: path.read_bytes() for path in kept if path.exists()}
    for path in saved:
        path.unlink()
    try:
        status = read_condor_status(layout)
        views = (text_of(status), text_of(status, show_all=True), json_of(status), status.to_dict())
    finally:
        for path in kept:
            path.unlink(missing_ok=True)
        for path, data in saved.items():
            path.write_bytes(data)
    return views


def views(layout: RunLayout) -> tuple[str, str, str, dict]:
    status = read_condor_status(layout)
    return text_of(status), text_of(read_condor_status(layout), show_all=True), json_of(status), status.to_dict()


def condor_dir(layout: RunLayout) -> Path:
    return layout.run_dir / "condor"


def observed_path(layout: RunLayout) -> Path:
    return layout.run_dir / OBSERVED_FILE


def forbid_reading_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("read from DAGMan's files although nothing changed")

    monkeypatch.setattr(observe, "read_jobstate", refuse)
    monkeypatch.setattr(ingest, "record_condor_usage", refuse)
    monkeypatch.setattr(observe.sf, "read_node_status", refuse)
    monkeypatch.setattr(observe.ev, "read_events", refuse)


def test_a_repeated_status_reads_no_dagman_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = make_run(tmp_path, "failed")
    first = views(layout)
    assert observed_path(layout).is_file()
    with monkeypatch.context() as patched:
        forbid_reading_files(patched)
        status = read_condor_status(layout)
        text = text_of(status)
        assert json_of(status) == first[2]
    assert text == first[0] and views(layout) == first == fresh(layout)
    assert json.loads(first[2]) == first[3]
    kept = read_condor_status(layout)
    assert kept.node_states() == {
        "fetch.us": "succeeded", "fetch.br": "succeeded", "train.us": "failed", "train.br": "failed",
        "report": "upstream_failed",
    }  # fmt: skip
    assert kept.record("train.us").attempts == 3 and kept.plan.nodes["report"].parents == ["train.us", "train.br"]


def _append(path: Path, text: str) -> None:
    with open(path, "a") as handle:
        handle.write(text)


CHANGES = {
    "event log appended": lambda layout: _append(
        condor_dir(layout) / "dagflow.jobs.log",
        "012 (107.000.000) 2025-03-01 14:05:50 Job was held.\n\tforgotten\n\tCode 21 Subcode 0\n...\n",
    ),
    "jobstate log appended": lambda layout: _append(
        condor_dir(layout) / "ratings.jobstate.log", "1740837999 INTERNAL *** DAGMAN_STARTED 101.0 ***\n"
    ),
    "node status file rewritten": lambda layout: (condor_dir(layout) / "ratings.status").write_text(
        (condor_dir(layout) / "ratings.status")
        .read_text()
        .replace("Timestamp = 1740837885;", "Timestamp = 1740837886;")
    ),
    "node status file removed": lambda layout: (condor_dir(layout) / "ratings.status").unlink(),
    "run cancelled": lambda layout: observe.CondorRecord.load(layout.run_dir).mark_removed(layout.run_dir),  # type: ignore[union-attr]
    "usage recorded": lambda layout: record_usage(layout.run_dir, USAGE),
    "dagman.out written": lambda layout: (condor_dir(layout) / "ratings.dag.dagman.out").write_text(
        "03/01/25 14:04:45 Workflow batch-id: <100.0>\n03/01/25 14:04:50 ERROR: out of disk\n"
        "03/01/25 14:04:50 **** condor_dagman (condor_DAGMAN) pid 1 EXITING WITH STATUS 1\n"
    ),
}
USAGE = NodeUsage(
    node="report", step="report", attempt=1, engine="condor", started=1.0, ended=3.0, wall_s=2.0, cpu_s=1.0,
    peak_memory_mb=12.0, gpu_memory_peak_mb=None, gpu_utilization_pct=None, host="vm", slot=None,
    requested={"cpus": 1}, allocated={}, exit_code=0, reason=None, extra={}, key="999",
)  # fmt: skip


@pytest.mark.parametrize("change", CHANGES)
def test_a_status_after_its_files_changed_is_read_from_them_again(tmp_path: Path, change: str) -> None:
    layout = make_run(tmp_path, "failed")
    before = views(layout)
    CHANGES[change](layout)
    after = views(layout)
    assert after == fresh(layout)
    assert (after != before) == (change != "run cancelled")  # a cancel after DAGMan ended changes nothing
    assert views(layout) == after  # and kept again


def test_a_plan_replaced_since_is_read_again(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    views(layout)
    plan = layout.load_plan()
    plan.pipeline = "renamed"
    layout.plan_path.write_text(plan.to_json())
    assert load_plan_index(layout).pipeline == "renamed"
    after = views(layout)
    assert "renamed" in after[0] and after == fresh(layout)


DAMAGES = {
    "garbage": lambda data: os.urandom(len(data)),
    "cut short": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "other JSON": lambda data: b'{"format": 1, "key": [1, 2]}\n',
    "a byte changed": lambda data: (
        data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 1]) + data[len(data) // 2 + 1 :]
    ),
}


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("name", [OBSERVED_FILE, "plan-index.json"])
def test_a_damaged_kept_file_is_ignored_and_written_again(tmp_path: Path, name: str, damage: str) -> None:
    layout = make_run(tmp_path, "failed")
    expected = views(layout)
    path = layout.run_dir / name
    path.write_bytes(DAMAGES[damage](path.read_bytes()))
    assert views(layout) == expected == fresh(layout)
    assert views(layout) == expected


def test_an_observed_record_of_another_run_is_not_used(tmp_path: Path) -> None:
    one = make_run(tmp_path, "failed", "one")
    other = make_run(tmp_path, "cancelled-same-second", "other")
    views(one)
    expected = fresh(other)
    shutil.copy(observed_path(one), observed_path(other))
    shutil.copy(plan_index_path(one), plan_index_path(other))
    assert views(other) == expected


def test_a_run_directory_moved_or_copied_reads_as_its_files_say(tmp_path: Path) -> None:
    layout = make_run(tmp_path / "a", "failed")
    views(layout)
    for move in (shutil.move, shutil.copytree):
        target = tmp_path / f"b-{move.__name__}" / layout.run_id
        move(layout.run_dir, target)
        moved = RunLayout.from_run_dir(target)
        assert views(moved) == fresh(moved)
        layout = moved


def test_a_live_dag_is_read_from_its_files_at_each_ingest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    layout = make_run(tmp_path, "running")
    status = read_condor_status(layout)
    assert status.state == "running" and status.node_states()["train.br"] == "held"
    read = []
    monkeypatch.setattr(observe, "read_jobstate", lambda path: read.append(path) or None)
    read_condor_status(layout)  # files unchanged: a live DAG's idle jobs are asked about again
    assert read == [observe.condor_record(layout).files.jobstate_log]


@pytest.mark.slow
def test_status_commands_at_once_agree(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    expected = fresh(layout)[2]
    command = [sys.executable, "-m", "dagflow", "status", layout.run_id, "--runs-dir", str(tmp_path), "--json"]
    for _ in range(3):
        for path in (layout.journal_path, observed_path(layout)):
            path.unlink(missing_ok=True)
        running = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT) for _ in range(4)
        ]
        for process in running:
            out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
            assert out.decode() == expected + "\n"
    assert not [path.name for path in layout.run_dir.rglob("*.tmp")]
    assert read_condor_status(layout).record("train.us").attempts == 3  # the journal holds each attempt once


def test_the_json_written_in_pieces_is_to_dicts(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    for status in (read_condor_status(layout), read_condor_status(layout), read_run_status(layout)):
        text = json_of(status)
        assert text == json.dumps(status.to_dict(), separators=(",", ":"))
        small = io.BytesIO()
        status.write_json(small, chunk=2)
        assert small.getvalue().decode() == text


# --- the plan index ----------------------------------------------------------------------------------


def test_a_plan_index_holds_what_status_reads_of_the_plan() -> None:
    plan = regional_plan(("us", "br", "de"))
    plan.nodes["report"].coords = {"kind": "all"}
    index = PlanIndex.of(plan)
    again = PlanIndex.from_dict(json.loads(index.to_json(plan=[1, 2])))
    assert again == index and again.names == list(plan.nodes)
    for position, node in enumerate(plan.nodes.values()):
        assert again.step(position) == node.step and again.coords(position) == node.coords
        assert [again.names[parent] for parent in again.parents(position)] == node.parents
    assert {name: step.retries for name, step in again.steps.items()} == {"fetch": 0, "train": 2, "report": 0}
    assert again.steps["train"].resources == plan.steps["train"].resources


@pytest.mark.parametrize(
    "change",
    [
        lambda data: data.update(format=99),
        lambda data: data["parent_list"].__setitem__(0, -1),
        lambda data: data["parent_list"].append(0),
        lambda data: data["step_of"].__setitem__(0, 7),
        lambda data: data["names"].__setitem__(1, data["names"][0]),
        lambda data: data["coord_value_of"]["region"].__setitem__(0, -1),
        lambda data: data["coord_axes_of"].pop(),
        lambda data: data.update(steps=[["fetch", 0, {"cpus": "x", "nope": 1}]]),
        lambda data: data.update(names="abc"),
    ],
)
def test_a_malformed_plan_index_is_refused(change: object) -> None:
    data = json.loads(PlanIndex.of(regional_plan()).to_json())
    change(data)  # type: ignore[operator]
    with pytest.raises(ValueError, match=r"plan index|index format"):
        PlanIndex.from_dict(data)


def test_a_missing_plan_is_no_such_run(tmp_path: Path) -> None:
    layout = make_run(tmp_path, "failed")
    views(layout)
    layout.plan_path.unlink()
    with pytest.raises(RunNotFoundError, match="no run"):
        read_condor_status(layout)


# --- the text view of a big run --------------------------------------------------------------------------


def test_a_big_runs_view_lists_the_nodes_that_need_looking_at_first(tmp_path: Path) -> None:
    plan = regional_plan(tuple(f"r{index:02d}" for index in range(30)))
    layout = RunLayout(tmp_path, plan.run_id)
    layout.create(plan)
    records = {name: NodeRecord(state="succeeded", attempts=1) for name in plan.nodes if name.startswith("fetch")}
    records.update({name: NodeRecord(state=UPSTREAM_FAILED) for name in plan.nodes if name.startswith("fetch.r2")})
    records.update({f"train.r{index:02d}": NodeRecord(state=FAILED, attempts=1, rc=1) for index in range(25)})
    status = RunStatus(layout, plan, JournalState(nodes=records, runners=1, finished="failed"), False)
    text = text_of(status)
    node_table = text[text.index("\nnode ") :]  # below the table per step (whose rows name steps)
    rows = [line.split()[:2] for line in node_table.splitlines() if line.startswith(("fetch.", "train.", "report"))]
    assert rows == [[f"train.r{index:02d}", "failed"] for index in range(run_status.ROW_LIMIT)]  # failed first
    assert "... and 15 more nodes (5 failed, 10 upstream-failed) not listed; --all lists every node" in text
    assert "(26 succeeded, cached or pending nodes not shown; --all lists them)" in text
    every = text_of(status, show_all=True)
    every_node = every[every.index("\nnode ") :].splitlines()
    assert len([line for line in every_node if line.startswith(("fetch.", "train.", "report"))]) == 61
    assert "more nodes" not in every
