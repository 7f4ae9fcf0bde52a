"""Helpers for the local-engine tests (plans built by hand), and tests of the journal format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.run.journal import CACHED, FAILED, SUCCEEDED, JournalWriter, read_journal

REPO = Path(__file__).resolve().parent.parent


def step(name: str, **fields: object) -> StepInfo:
    values: dict[str, object] = {
        "name": name,
        "kind": "command",
        "axes": (),
        "resources": Resources(memory_mb=16),
        "retries": 0,
        "retry_unless_exit": (),
        "timeout_s": None,
        "priority": 0,
        "metrics": None,
    }
    values.update(fields)
    return StepInfo(**values)  # type: ignore[arg-type]


def node(name: str, step_name: str, script: str, parents: list[str] | None = None, **fields: object) -> Node:
    """A node running `sh -c script`."""
    return Node(
        name=name,
        step=step_name,
        argv=["sh", "-c", script],
        env=fields.pop("env", {}),  # type: ignore[arg-type]
        coords=fields.pop("coords", {}),  # type: ignore[arg-type]
        parents=parents or [],
        **fields,  # type: ignore[arg-type]
    )


def make_plan(workdir: Path, steps: list[StepInfo], nodes: list[Node], run_id: str = "r1") -> Plan:
    return Plan(
        pipeline="test",
        run_id=run_id,
        source="pipeline.yaml",
        steps={s.name: s for s in steps},
        nodes={n.name: n for n in nodes},
        workdir=str(workdir),
    )


def dagflow_cli(*args: str, cwd: Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=600,  # a safety net against a hang, no deadline: at load 29 one training node took 35 s
        **kwargs,  # type: ignore[arg-type]
    )


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def test_journal_folds_events_and_ignores_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    writer = JournalWriter(path)
    writer.write({"e": "run", "pid": 1})
    writer.write({"e": "start", "n": "a", "a": 1, "pid": 10, "st": 5})
    writer.write({"e": "end", "n": "a", "a": 1, "s": SUCCEEDED, "rc": 0, "k": "key-a"}, durable=True)
    writer.write({"e": "cached", "n": "b", "k": "key-b"}, durable=True)
    writer.write({"e": "start", "n": "c", "a": 1, "pid": 11, "st": 6})
    writer.write({"e": "end", "n": "c", "a": 1, "s": FAILED, "rc": 3, "why": "exit code 3"}, durable=True)
    writer.write({"e": "upstream_failed", "n": ["d"], "by": "c"}, durable=True)
    writer.close()
    with open(path, "ab") as handle:
        handle.write(b'{"e":"start","n":"x","a"')  # the runner died mid-write

    state = read_journal(path)
    assert state.skipped_lines == 1
    assert state.nodes["a"].state == SUCCEEDED and state.nodes["a"].key == "key-a"
    assert state.nodes["b"].state == CACHED
    assert state.nodes["c"].state == FAILED and state.nodes["c"].rc == 3
    assert state.nodes["d"].state == "upstream_failed"
    assert "x" not in state.nodes
    assert state.done() == {"a", "b"}

    JournalWriter(path).close()  # the next runner cuts the torn tail before appending
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    assert all(json.loads(line) for line in lines[:-1])
