"""The journal's event constructors and appenders (run/journal.py) write exactly the lines dagflow wrote
before they existed, so old run directories read as before; and no other module spells an event."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import make_plan, node, step

import dagflow
from dagflow.engines.batch.node import main as node_main
from dagflow.engines.local import RunOptions
from dagflow.run.journal import (
    CACHED,
    FAILED,
    INTERRUPTED,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalWriter,
    append_events,
    cached_event,
    end_event,
    finish_event,
    read_journal,
    replan_event,
    run_event,
    start_event,
    upstream_failed_event,
)

NOW = 1700000000.1234  # journaled as 1700000000.123

# Recorded from the writers before the constructors (the local runner's JournalWriter, the batch
# engine's and observer's append_events, the batch node wrapper's own appender), with time.time() = NOW.
RECORDED_LOCAL = b"""\
{"e":"run","pid":4242,"resume":false,"t":1700000000.123}
{"e":"replan","n":["b","c"],"t":1700000000.123}
{"e":"start","n":"a","a":1,"pid":4243,"t":1700000000.123}
{"e":"end","n":"a","a":1,"s":"succeeded","rc":0,"k":"k1","t":1700000000.123}
{"e":"end","n":"b","a":2,"s":"retry","rc":1,"why":"exit code 1","t":1700000000.123}
{"e":"cached","n":"c","k":"k2","t":1700000000.123}
{"e":"upstream_failed","n":["d","\\u00e9"],"by":"b","t":1700000000.123}
{"e":"finish","s":"failed","t":1700000000.123}
"""
RECORDED_BATCH = b"""\
{"e":"run","engine":"slurm","sub":2,"resume":true,"t":1700000000.123}
{"e":"replan","n":["x"],"t":1700000000.123}
{"e":"start","n":"x","a":1,"job":"123_4","t":1700000000.123}
{"e":"end","n":"x","a":1,"s":"failed","rc":3,"why":"exit code 3","t":1700000000.123}
{"e":"end","n":"y","a":1,"s":"succeeded","rc":0,"t":1700000000.123}
{"e":"upstream_failed","n":["w"],"by":"x","t":1700000000.123}
{"e":"end","n":"v","s":"interrupted","why":"cancelled","t":1700000000.123}
{"e":"upstream_failed","n":["u","t"],"by":"x","t":1700000000.123}
{"e":"finish","s":"interrupted","t":1700000000.123}
"""


def test_each_constructor_writes_the_recorded_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW)
    writer = JournalWriter(tmp_path / "local.jsonl")
    for event in [
        run_event(False, pid=4242),
        replan_event(["b", "c"]),
        start_event("a", 1, pid=4243),
        end_event("a", SUCCEEDED, attempt=1, rc=0, key="k1"),
        end_event("b", "retry", attempt=2, rc=1, why="exit code 1"),
        cached_event("c", "k2"),
        upstream_failed_event(["d", "é"], "b"),
        finish_event(FAILED),
    ]:
        writer.write(event, durable=True)
    writer.close()
    batch = tmp_path / "batch.jsonl"
    append_events(batch, [run_event(True, engine="slurm", sub=2)])
    append_events(batch, [replan_event(["x"])])
    append_events(batch, [start_event("x", 1, job="123_4")], durable=False)
    append_events(batch, [end_event("x", FAILED, attempt=1, rc=3, why="exit code 3")])
    append_events(batch, [end_event("y", SUCCEEDED, attempt=1, rc=0)])
    append_events(batch, [upstream_failed_event(["w"], "x")])
    append_events(
        batch,
        [
            end_event("v", INTERRUPTED, why="cancelled"),
            upstream_failed_event(["u", "t"], "x"),
            finish_event(INTERRUPTED),
        ],
    )
    assert (tmp_path / "local.jsonl").read_bytes() == RECORDED_LOCAL
    assert batch.read_bytes() == RECORDED_BATCH


def test_the_recorded_lines_read_back(tmp_path: Path) -> None:
    (tmp_path / "local.jsonl").write_bytes(RECORDED_LOCAL)
    (tmp_path / "batch.jsonl").write_bytes(RECORDED_BATCH)
    local, batch = read_journal(tmp_path / "local.jsonl"), read_journal(tmp_path / "batch.jsonl")
    assert local.bad_lines == batch.bad_lines == 0
    states = {name: (record.state, record.attempts) for name, record in local.nodes.items()}
    assert states == {
        "a": (SUCCEEDED, 1),
        "b": ("retrying", 0),
        "c": (CACHED, 0),
        "d": (UPSTREAM_FAILED, 0),
        "é": (UPSTREAM_FAILED, 0),
    }
    assert (local.runners, local.finished, local.nodes["a"].key) == (1, FAILED, "k1")
    states = {name: record.state for name, record in batch.nodes.items()}
    assert states == {
        "x": FAILED,
        "y": SUCCEEDED,
        "w": UPSTREAM_FAILED,
        "v": INTERRUPTED,
        "u": UPSTREAM_FAILED,
        "t": UPSTREAM_FAILED,
    }
    assert (batch.runners, batch.finished, batch.nodes["x"].rc) == (1, INTERRUPTED, 3)
    # a replan marks a node's earlier processes stale until its next start
    assert (local.replanned, batch.replanned) == ({"b", "c"}, set())


def _masked(path: Path) -> list[str]:
    """The journal's lines, sorted (nodes run side by side), with times, pids and cache keys masked."""
    text = re.sub(r'"t":[0-9.]+', '"t":T', path.read_text())
    text = re.sub(r'"k":"[0-9a-f]+"', '"k":K', re.sub(r'"pid":[0-9]+', '"pid":P', text))
    return sorted(text.splitlines())


def test_the_local_runner_and_the_batch_wrapper_write_the_recorded_lines(tmp_path: Path) -> None:
    steps = [step("s"), step("r", retries=1)]
    nodes = [node("a", "s", "true"), node("b", "r", "exit 3"), node("c", "s", "true", parents=["b"])]
    options = RunOptions(runs_dir=tmp_path / "runs", jobs=1, kill_grace_s=0.5)
    run_local(make_plan(tmp_path, steps, nodes), options)
    run_local(make_plan(tmp_path, steps, nodes, run_id="r2"), options)  # a is cached
    assert _masked(tmp_path / "runs" / "r1" / "journal.jsonl") == [
        '{"e":"end","n":"a","a":1,"s":"succeeded","rc":0,"k":K,"t":T}',
        '{"e":"end","n":"b","a":1,"s":"retry","rc":3,"why":"exit code 3","t":T}',
        '{"e":"end","n":"b","a":2,"s":"failed","rc":3,"why":"exit code 3","t":T}',
        '{"e":"finish","s":"failed","t":T}',
        '{"e":"run","pid":P,"resume":false,"t":T}',
        '{"e":"start","n":"a","a":1,"pid":P,"t":T}',
        '{"e":"start","n":"b","a":1,"pid":P,"t":T}',
        '{"e":"start","n":"b","a":2,"pid":P,"t":T}',
        '{"e":"upstream_failed","n":["c"],"by":"b","t":T}',
    ]
    assert '{"e":"cached","n":"a","k":K,"t":T}' in _masked(tmp_path / "runs" / "r2" / "journal.jsonl")

    (tmp_path / "logs").mkdir()
    journal = tmp_path / "journal.jsonl"
    common = ["--journal", str(journal), "--logs", str(tmp_path / "logs"), "--workdir", str(tmp_path), "--job", "7"]
    node_main([*common, "--node", "b", "--retries", "1", "--", "sh", "-c", "exit 3"])
    node_main([*common, "--node", "c", "--parent", "b", "--", "true"])
    node_main([*common, "--node", "a", "--", "true"])
    assert _masked(journal) == [
        '{"e":"end","n":"a","a":1,"s":"succeeded","rc":0,"t":T}',
        '{"e":"end","n":"b","a":1,"s":"retry","rc":3,"why":"exit code 3","t":T}',
        '{"e":"end","n":"b","a":2,"s":"failed","rc":3,"why":"exit code 3","t":T}',
        '{"e":"start","n":"a","a":1,"job":"7","t":T}',
        '{"e":"start","n":"b","a":1,"job":"7","t":T}',
        '{"e":"start","n":"b","a":2,"job":"7","t":T}',
        '{"e":"upstream_failed","n":["c"],"by":"b","t":T}',
    ]


def test_no_module_but_run_journal_spells_an_event() -> None:
    """`grep -rn '"e":' dagflow | grep -v run/journal.py` finds nothing: every event is built in one place."""
    package = Path(dagflow.__file__).parent
    found = [
        f"{path.relative_to(package)}:{number}"
        for path in sorted(package.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts and path != package / "run" / "journal.py"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if '"e":' in line
    ]
    assert found == []
