"""What of a local run is still live, for the one live-run check (dagflow/run/live_runs.py).

A runner holding the run's lock drives it: every node it has not finished may still start. A runner killed
with kill -9 (or stopped by a full disk) leaves its keeper behind: the nodes it started keep running, and
their exits are recorded in `procs.jsonl` with no runner to journal them or to record them in the cache
(recovery.py sorts them). A run whose journal ends with the runner's `finish` event is settled, told from
its last line alone.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagflow.engines.local.recovery import unjournaled_nodes
from dagflow.run.journal import is_finish_line, read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.live_runs import Live
from dagflow.run.lock import holder_pid, is_locked

_TAIL_BYTES = 4096  # the finish event is one short line


def local_live(layout: RunLayout) -> Live | None:
    """The run's live nodes (None: nothing of it is live)."""
    if ends_with_finish(layout.journal_path):
        return None
    if is_locked(layout.lock_path):
        done = read_journal(layout.journal_path).done()
        pid = holder_pid(layout.lock_path)
        running = frozenset(name for name in layout.load_plan().nodes if name not in done)
        return Live(running, driver=f"runner pid {pid}" if pid else "a live runner")
    pending = unjournaled_nodes(layout)
    if not pending:
        return None
    running = frozenset(name for name, rc in pending.items() if rc is None)
    return Live(running, frozenset(pending) - running)


def ends_with_finish(journal: Path) -> bool:
    try:
        with open(journal, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return False
    return is_finish_line(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
