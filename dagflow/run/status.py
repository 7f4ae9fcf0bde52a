"""Read a run directory into one view: the plan, every node's state, and whether a runner is live."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

from dagflow.plan import Plan
from dagflow.run.journal import (
    INTERRUPTED,
    NODE_STATES,
    PENDING,
    RETRYING,
    RUNNING,
    JournalState,
    NodeRecord,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.lock import is_locked

# Run states: running (a runner holds the lock), succeeded | failed | interrupted (the last runner
# finished so), not-started (prepared only), stopped (the last runner died without finishing: resume it).
RUN_RUNNING = "running"
RUN_NOT_STARTED = "not-started"
RUN_STOPPED = "stopped"


@dataclass(slots=True)
class RunStatus:
    layout: RunLayout
    plan: Plan
    journal: JournalState
    runner_alive: bool

    @property
    def run_id(self) -> str:
        return self.layout.run_id

    @property
    def state(self) -> str:
        if self.runner_alive:
            return RUN_RUNNING
        if self.journal.finished:
            return self.journal.finished
        return RUN_NOT_STARTED if self.journal.runners == 0 else RUN_STOPPED

    def record(self, node: str) -> NodeRecord:
        return self.journal.nodes.get(node) or NodeRecord()

    def state_of(self, record: NodeRecord) -> str:
        """A node the journal shows running under a runner that is gone was cut off: interrupted."""
        if not self.runner_alive and record.state in (RUNNING, RETRYING):
            return INTERRUPTED
        return record.state

    def node_states(self) -> dict[str, str]:
        records = self.journal.nodes
        return {name: (self.state_of(records[name]) if name in records else PENDING) for name in self.plan.nodes}

    def counts(self) -> dict[str, int]:
        counted = Counter(self.node_states().values())
        return {state: counted[state] for state in NODE_STATES if counted[state]}

    def to_dict(self) -> dict[str, Any]:
        nodes = []
        for name, node in self.plan.nodes.items():
            record = self.record(name)
            nodes.append(
                {
                    "node": name,
                    "step": node.step,
                    "coords": node.coords,
                    "state": self.state_of(record),
                    "attempts": record.attempts,
                    "exit_code": record.rc,
                    "why": record.why,
                    "started": record.started,
                    "ended": record.ended,
                }
            )
        return {
            "run_id": self.run_id,
            "pipeline": self.plan.pipeline,
            "run_dir": str(self.layout.run_dir),
            "state": self.state,
            "started": self.journal.started,
            "finished": self.journal.finished_at,
            "counts": self.counts(),
            "total": len(self.plan.nodes),
            "nodes": nodes,
        }

    def duration(self, record: NodeRecord) -> float | None:
        if record.started is None:
            return None
        end = record.ended if record.ended is not None else time.time()
        return max(0.0, end - record.started)


def read_status(layout: RunLayout) -> RunStatus:
    plan = layout.load_plan()
    return RunStatus(layout, plan, read_journal(layout.journal_path), is_locked(layout.lock_path))
