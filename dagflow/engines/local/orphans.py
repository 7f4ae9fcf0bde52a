"""`dagflow cancel` of a local run whose runner died: stop the nodes its keeper still runs (each node's
process group), journal them interrupted, so that a later resume reruns them and nothing is left running
that no dagflow command could stop."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable

from dagflow.engines.local.procs import ProcEntry, held_by_keeper, kill_group, kill_orphans, node_alive, read_procs
from dagflow.engines.local.recovery import Fate, unjournaled
from dagflow.run.journal import INTERRUPTED, append_events, end_event, finish_event, read_journal, start_event
from dagflow.run.layout import RunLayout

_EXIT_RECORD_WAIT_S = 10.0  # how long a keeper may take to record the exit of a node it saw killed


def stop_cut_short(layout: RunLayout, grace_s: float) -> list[str]:
    """Stop the live nodes of the run in layout, cut short (its runner died); the nodes stopped. The caller
    holds the run's lock (run/lock.py stop_driven): no runner starts on the run while they are journaled."""
    journal = read_journal(layout.journal_path)
    held: dict[str, ProcEntry] = {}
    orphans: list[tuple[int, str]] = []
    unrecorded = False
    for name, entry, fate in unjournaled(read_procs(layout.procs_path), journal.nodes, layout.run_dir):
        if fate is Fate.HELD:
            held[name] = entry
        elif fate is Fate.LOST and node_alive(entry.pid, layout.run_id, name):  # its keeper died too
            orphans.append((entry.pid, name))
        else:
            unrecorded = True  # a result a resume takes
    for entry in held.values():
        kill_group(entry.pid, signal.SIGTERM)
    _wait(lambda: not any(held_by_keeper(entry.pid, layout.run_dir) for entry in held.values()), grace_s)
    for entry in held.values():
        kill_group(entry.pid, signal.SIGKILL)
    kill_orphans(orphans, layout.run_id, grace_s)
    stopped: dict[str, ProcEntry | None] = dict(held)
    stopped.update((name, None) for _, name in orphans)
    if stopped:
        _journal_stopped(layout, stopped, finished=not unrecorded)
    return sorted(stopped)


def _journal_stopped(layout: RunLayout, stopped: dict[str, ProcEntry | None], finished: bool) -> None:
    """Each stopped node's end, interrupted, with the exit its keeper recorded; the run's finish when no
    result is left for a resume to take."""
    _wait(lambda: all(_recorded_rc(layout, name, entry) is not None for name, entry in stopped.items() if entry),
          _EXIT_RECORD_WAIT_S)
    journal = read_journal(layout.journal_path)
    events = []
    for name, entry in stopped.items():
        if entry is not None:
            record = journal.nodes.get(name)
            if record is None or record.pid != entry.pid:
                events.append(start_event(name, entry.attempt, pid=entry.pid))
        rc = _recorded_rc(layout, name, entry) if entry is not None else None
        attempt = entry.attempt if entry is not None else journal.nodes[name].attempts or 1
        rc = rc if rc is not None else -signal.SIGTERM
        events.append(end_event(name, INTERRUPTED, attempt=attempt, rc=rc, why="stopped by dagflow cancel"))
    if finished:
        events.append(finish_event(INTERRUPTED))
    append_events(layout.journal_path, events)


def _recorded_rc(layout: RunLayout, name: str, entry: ProcEntry) -> int | None:
    recorded = read_procs(layout.procs_path).get(name)
    return recorded.rc if recorded is not None and recorded.pid == entry.pid else None


def _wait(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
