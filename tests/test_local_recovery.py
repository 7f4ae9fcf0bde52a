"""recovery.py, the one rule that sorts the nodes an earlier runner's keeper recorded: the runner's resume
and `status` (unjournaled_nodes) both read it."""

from __future__ import annotations

import json
from pathlib import Path

from dagflow.engines.local.procs import ProcEntry
from dagflow.engines.local.recovery import Fate, unjournaled, unjournaled_nodes, unrecorded_starts
from dagflow.run.journal import RUNNING, SUCCEEDED, NodeRecord
from dagflow.run.layout import RunLayout

_GONE = 2**22 + 12345  # above the default pid_max: no process has it


def test_exits_are_taken_journaled_ends_skipped_and_dead_keepers_lose_their_nodes(tmp_path: Path) -> None:
    procs = {
        "done": ProcEntry(1, _GONE, None, rc=0),
        "exited": ProcEntry(1, _GONE + 1, None, rc=3),
        "lost": ProcEntry(2, _GONE + 2, _GONE + 3),
    }
    journaled = {
        "done": NodeRecord(state=SUCCEEDED, pid=_GONE),
        "lost": NodeRecord(state=RUNNING, pid=_GONE + 2),
        "old": NodeRecord(state=RUNNING, pid=_GONE + 4),  # started before the keeper: no record of its own
    }
    found = {name: fate for name, _, fate in unjournaled(procs, journaled, tmp_path)}
    assert found == {"exited": Fate.EXITED, "lost": Fate.LOST}
    assert unrecorded_starts(procs, journaled) == [(_GONE + 4, "old")]


def test_status_lists_recorded_exits_and_leaves_out_nodes_nothing_runs(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r1")
    layout.run_dir.mkdir(parents=True)
    lines = [
        {"n": "a", "a": 1, "pid": _GONE, "k": _GONE + 9},
        {"n": "a", "a": 1, "pid": _GONE, "rc": 1, "w": 0.1, "c": 0.0, "m": 1, "t": 0.0},
        {"n": "b", "a": 1, "pid": _GONE + 1, "k": _GONE + 9},
    ]
    layout.procs_path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert unjournaled_nodes(layout) == {"a": 1}
