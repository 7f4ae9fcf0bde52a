"""Run directories: layout, run ids, the durable journal of node states, and status reading.

Every engine's run lives in `.dagflow/runs/<run-id>/`; nothing else is state.
"""

from dagflow.run.ids import new_run_id, validate_run_id
from dagflow.run.journal import JournalState, JournalWriter, NodeRecord, read_journal
from dagflow.run.layout import RunLayout, RunNotFoundError
from dagflow.run.status import RunStatus, read_status

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
