"""Read a run directory into one view: the plan, every node's state, and whether a runner is live."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.plan import Plan
from dagflow.run.journal import (
    CHECKPOINTED,
    DONE_STATES,
    FAILED,
    INTERRUPTED,
    NODE_STATES,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalState,
    NodeRecord,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.lock import is_locked
from dagflow.run.usage import NodeUsage, latest_by_node, read_usage, usage_dict

# Run states: running (a runner holds the lock), succeeded | failed | interrupted (the last runner
# finished so), not-started (prepared only), stopped (the last runner died without finishing: resume it).
RUN_RUNNING = "running"
RUN_NOT_STARTED = "not-started"
RUN_STOPPED = "stopped"

# Node states only batch engines report (the journal never holds them): a node whose job waits in the
# batch queue, and one whose job the batch system put on hold.
QUEUED = "queued"
HELD = "held"
STATE_ORDER = (PENDING, QUEUED, HELD, *NODE_STATES[1:])
STDERR_TAIL_LINES = 5
STDERR_TAIL_NODES = 20  # failed nodes whose stderr tail status reads (each is a file to open)


@dataclass(slots=True)
class RunStatus:
    layout: RunLayout
    plan: Plan
    journal: JournalState
    runner_alive: bool
    engine: str = "local"
    notes: list[str] = field(default_factory=list)  # engine-specific lines for the view (DAGMan job id...)
    extra: dict[str, Any] = field(default_factory=dict)  # engine-specific facts, under "<engine>" in JSON
    resume_hint: str | None = None  # the command that continues this run, when not the local engine's
    # Nodes that go on, or ended, with no runner alive to journal them (the local engine's keeper outlives
    # a killed runner): None while one runs, else its recorded exit code.
    unjournaled: dict[str, int | None] = field(default_factory=dict)
    _usage: dict[str, NodeUsage] | None = None  # each node's latest usage record, read on first use

    def usage(self, nodes: Collection[str] | None = None) -> dict[str, NodeUsage]:
        """Each node's latest measured attempt (usage.jsonl; engines write it before status reads it).
        nodes: only these nodes' are needed (the text view of a big run shows few): the records of others
        are not decoded, and may be left out."""
        if self._usage is not None:
            return self._usage
        if nodes is not None:
            return latest_by_node(read_usage(self.layout.run_dir, frozenset(nodes)))
        self._usage = latest_by_node(read_usage(self.layout.run_dir))
        return self._usage

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

    def state_of(self, name: str, record: NodeRecord) -> str:
        """A node the journal shows running under a runner that is gone was cut off (interrupted), unless
        it runs on, or ended, without the runner."""
        if name in self.unjournaled:
            rc = self.unjournaled[name]
            return RUNNING if rc is None else SUCCEEDED if rc == 0 else FAILED
        if not self.runner_alive and record.state in (RUNNING, RETRYING, CHECKPOINTED):
            return INTERRUPTED
        return record.state

    def node_states(self) -> dict[str, str]:
        records, unjournaled = self.journal.nodes, self.unjournaled
        return {
            name: (self.state_of(name, records.get(name) or NodeRecord()) if name in records or name in unjournaled
                   else PENDING)
            for name in self.plan.nodes
        }

    def counts(self) -> dict[str, int]:
        counted = Counter(self.node_states().values())
        ordered = {state: counted[state] for state in STATE_ORDER if counted[state]}
        ordered.update((state, count) for state, count in counted.items() if state not in ordered)
        return ordered

    def progress(self, states: dict[str, str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
        """Per matrix axis, per value (e.g. region us): done, failed and total nodes."""
        states = states or self.node_states()
        axes: dict[str, dict[str, dict[str, int]]] = {}
        for name, node in self.plan.nodes.items():
            state = states[name]
            for axis, value in node.coords.items():
                tally = axes.setdefault(axis, {}).setdefault(value, {"done": 0, "failed": 0, "total": 0})
                tally["total"] += 1
                if state in DONE_STATES:
                    tally["done"] += 1
                elif state in (FAILED, UPSTREAM_FAILED):
                    tally["failed"] += 1
        return axes

    def stderr_tail(self, node: str, lines: int = STDERR_TAIL_LINES) -> list[str]:
        """The last lines a node wrote to stderr (its latest attempt's, where the engine keeps one file)."""
        path: Path = self.layout.stderr_path(node)
        try:
            with open(path, "rb") as handle:
                size = handle.seek(0, 2)
                handle.seek(max(0, size - 8192))
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def failed_stderr(self, states: dict[str, str] | None = None) -> dict[str, list[str]]:
        states = states or self.node_states()
        failed = [name for name, state in states.items() if state == FAILED][:STDERR_TAIL_NODES]
        return {name: tail for name in failed if (tail := self.stderr_tail(name))}

    def to_dict(self) -> dict[str, Any]:
        nodes = []
        states = self.node_states()
        usage = self.usage()
        for name, node in self.plan.nodes.items():
            record = self.record(name)
            used = usage.get(name)
            nodes.append(
                {
                    "node": name,
                    "step": node.step,
                    "coords": node.coords,
                    "state": states[name],
                    "attempts": record.attempts,
                    "restarts": record.restarts,
                    "exit_code": record.rc,
                    "why": record.why,
                    "started": record.started,
                    "ended": record.ended,
                    "usage": None if used is None else usage_json(used),
                }
            )
        summary = {
            "run_id": self.run_id,
            "pipeline": self.plan.pipeline,
            "run_dir": str(self.layout.run_dir),
            "engine": self.engine,
            "state": self.state,
            "started": self.journal.started,
            "finished": self.journal.finished_at,
            "counts": self.counts(),
            "total": len(self.plan.nodes),
            "overrides": self.plan.overrides,
            "progress": self.progress(states),
            "failed_stderr": self.failed_stderr(states),
            "nodes": nodes,
        }
        if self.extra:
            summary[self.engine] = self.extra
        return summary

    def duration(self, record: NodeRecord) -> float | None:
        if record.started is None:
            return None
        end = record.ended if record.ended is not None else time.time()
        return max(0.0, end - record.started)


def usage_json(usage: NodeUsage) -> dict[str, Any]:
    """A node's latest usage record in `status --json` (the usage.jsonl fields but its name and step)."""
    values = usage_dict(usage)
    del values["node"], values["step"]
    return values


def read_status(layout: RunLayout) -> RunStatus:
    plan = layout.load_plan()
    journal = read_journal(layout.journal_path)
    status = RunStatus(layout, plan, journal, is_locked(layout.lock_path))
    if journal.bad_lines:  # said once, here, rather than failing on each
        status.notes.append(f"skipped {journal.bad_lines} malformed line(s) in {layout.journal_path}")
        status.extra["journal_malformed_lines"] = journal.bad_lines
    return status
