"""What the journal alone says once a batch scheduler has let go of jobs: which never-started nodes are
below a failure, and how the run as a whole ended."""

from __future__ import annotations

from collections.abc import Container

from dagflow.plan import Plan
from dagflow.run.journal import (
    DONE_STATES,
    FAILED,
    INTERRUPTED,
    PENDING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    Event,
    JournalState,
    upstream_failed_event,
)


def blocked_nodes(plan: Plan, journal: JournalState, queued: Container[str]) -> list[Event]:
    """`upstream_failed` events for never-started nodes below a failed node whose jobs are no longer queued
    (the scheduler dropped them, or their script failed before the node wrapper ran)."""
    states = {name: record.state for name, record in journal.nodes.items()}
    blocked_by: dict[str, list[str]] = {}
    culprit: dict[str, str] = {}  # node -> the failed node it is below (or is)
    for name, node in plan.nodes.items():  # topological: parents are settled first
        state = states.get(name, PENDING)
        if state == FAILED:
            culprit[name] = name
            continue
        by = next((culprit[parent] for parent in node.parents if parent in culprit), None)
        if by is None:
            continue
        if state == UPSTREAM_FAILED:
            culprit[name] = by
        elif state == PENDING and name not in queued:
            culprit[name] = by
            blocked_by.setdefault(by, []).append(name)
    return [upstream_failed_event(names, by) for by, names in blocked_by.items()]


def run_state(plan: Plan, journal: JournalState, cancelled: bool) -> str:
    """The state of a run none of whose jobs is queued any more."""
    states = [journal.nodes[name].state if name in journal.nodes else PENDING for name in plan.nodes]
    if all(state in DONE_STATES for state in states):
        return SUCCEEDED
    if cancelled or any(state in (INTERRUPTED, PENDING) for state in states):
        return INTERRUPTED
    return FAILED if any(state in (FAILED, UPSTREAM_FAILED) for state in states) else INTERRUPTED
