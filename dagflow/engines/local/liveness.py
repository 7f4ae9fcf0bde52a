"""What of a local run is still live, for the one live-run check (dagflow/run/live_runs.py).

A runner holding the run's lock drives it: every node it has not finished may still start. A runner killed
with kill -9 (or stopped by a full disk) leaves its keeper behind: the nodes it started keep running, and
their exits are recorded in `procs.jsonl` with no runner to journal them or to record them in the cache
(recovery.py sorts them). A run whose journal ends with the runner's `finish` event is settled, told from
its last line alone.
"""

from __future__ import annotations

from dagflow.engines.local.recovery import unjournaled_nodes
from dagflow.run.journal import ends_with_finish
from dagflow.run.layout import RunLayout
from dagflow.run.live_runs import Live, driven


def local_live(layout: RunLayout) -> Live | None:
    """The run's live nodes (None: nothing of it is live)."""
    if ends_with_finish(layout.journal_path):
        return None
    if (live := driven(layout, "runner")) is not None:
        return live
    pending = unjournaled_nodes(layout)
    if not pending:
        return None
    running = frozenset(name for name, rc in pending.items() if rc is None)
    return Live(running, frozenset(pending) - running)
