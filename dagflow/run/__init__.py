"""Run directories: layout, run ids, the durable journal of node states, and status reading.

Every engine's run lives in `.dagflow/runs/<run-id>/`; nothing else is state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagflow.lazy import lazy_exports

if TYPE_CHECKING:
    from dagflow.run.ids import new_run_id, validate_run_id
    from dagflow.run.journal import JournalState, JournalWriter, NodeRecord, read_journal
    from dagflow.run.layout import RunLayout, RunNotFoundError
    from dagflow.run.status import RunStatus, read_status

_EXPORTS = {
    "JournalState": "journal",
    "JournalWriter": "journal",
    "NodeRecord": "journal",
    "RunLayout": "layout",
    "RunNotFoundError": "layout",
    "RunStatus": "status",
    "new_run_id": "ids",
    "read_journal": "journal",
    "read_status": "status",
    "validate_run_id": "ids",
}
__all__ = [
    "JournalState",
    "JournalWriter",
    "NodeRecord",
    "RunLayout",
    "RunNotFoundError",
    "RunStatus",
    "new_run_id",
    "read_journal",
    "read_status",
    "validate_run_id",
]

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
