"""What became of the nodes an earlier runner's keeper started: the one rule that sorts them, used by the
runner as it resumes a run (adoption.py) and by `status`, the live-run check and `cancel` for runs cut short
(engine.py, through jobs/driven.py).

A node whose latest process its keeper recorded (procs.jsonl, read by procs.read_procs) is either

- *journaled*: the journal records that process's end; nothing is left to do (not listed here);
- EXITED: its keeper recorded its exit code, which the journal lacks: that is its result;
- HELD: still an unreaped child of a live keeper process of the run (the keeper, or the warden that took
  its nodes over: procs.held_by_keeper): it runs, and a resume adopts it;
- EXITING: not held, but its keeper or warden lives (procs.keeper_alive): it has just exited, and its
  exit is about to be recorded;
- LOST: neither: nothing will ever record how it ends; a resume kills what is left of it and reruns it.

A node the journal shows running whose process no keeper recorded (started by a dagflow from before the
keeper, or its record lost) is lost too (`unrecorded_starts`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from pathlib import Path

from dagflow.engines.local.procs import ProcEntry, held_by_keeper, keeper_alive, node_alive, read_procs
from dagflow.run.journal import RUNNING, NodeRecord, read_journal
from dagflow.run.layout import RunLayout


class Fate(enum.Enum):
    EXITED = "exited"
    HELD = "held"
    EXITING = "exiting"
    LOST = "lost"


def unjournaled(
    procs: Mapping[str, ProcEntry], journaled: Mapping[str, NodeRecord], run_dir: Path
) -> Iterator[tuple[str, ProcEntry, Fate]]:
    """(node, its latest process, its fate) for each process in procs whose end the journal's node records
    lack, in procs' order."""
    for name, entry in procs.items():
        record = journaled.get(name)
        if record is not None and record.pid == entry.pid and record.state != RUNNING:
            continue  # its end is journaled
        if entry.rc is not None:  # exited, and its keeper killed its process group
            yield name, entry, Fate.EXITED
        elif held_by_keeper(entry.pid, run_dir):  # its keeper (or warden) lives and has not reaped it
            yield name, entry, Fate.HELD
        elif keeper_alive(entry.keeper, run_dir):  # it has just exited: its keeper is about to record how
            yield name, entry, Fate.EXITING
        else:  # nothing can record its exit any more
            yield name, entry, Fate.LOST


def unrecorded_starts(procs: Mapping[str, ProcEntry], journaled: Mapping[str, NodeRecord]) -> list[tuple[int, str]]:
    """(pid, node) of nodes the journal shows running whose process no keeper recorded: lost."""
    recorded = {entry.pid for entry in procs.values()}
    return [
        (record.pid, name)
        for name, record in journaled.items()
        if record.state == RUNNING and record.pid and record.pid not in recorded
    ]


def unjournaled_nodes(layout: RunLayout) -> dict[str, int | None]:
    """For a run no runner is running: its nodes that a keeper still runs or is about to record the exit
    of, or whose process outlived its keeper (None), and those whose exit a keeper recorded after the
    runner died (the exit code); a resume adopts the first (or kills them, and reruns them) and takes the
    second."""
    procs = read_procs(layout.procs_path)
    if not procs:
        return {}
    journal = read_journal(layout.journal_path)
    found: dict[str, int | None] = {}
    for name, entry, fate in unjournaled(procs, journal.nodes, layout.run_dir):
        if fate is Fate.EXITED:
            found[name] = entry.rc
        elif fate is not Fate.LOST or node_alive(entry.pid, layout.run_id, name):
            found[name] = None
    return found
