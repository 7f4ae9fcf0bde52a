"""Read a run directory into one view: the plan, every node's state, and whether a runner is live."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from dagflow.bounded import BoundedInputError, read_tail
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.plan.model import PROMOTE_SUFFIX
from dagflow.run.journal import (
    CACHED,
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
from dagflow.run.observed import read_observed
from dagflow.run.promotions import promotion_nodes, promotion_records
from dagflow.run.step_table import StepRow, step_rows
from dagflow.run.usage import NodeUsage, latest_by_node, read_usage, usage_dict
from dagflow.text import plural

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
# States a run's text view does not list one row each (unless asked, or the run is small).
QUIET_STATES = frozenset({SUCCEEDED, CACHED, PENDING})
PLAN_INDEX_FILE = "plan-index.json"  # the plan's index (plan/index.py), keyed by plan.json's stamp
SMALL_RUN = 50  # runs with at most this many nodes list every node by default, and no table of steps
ROW_LIMIT = 20  # the most nodes a bigger run's text view lists one row each, unless --all
# The states whose nodes a big run's view lists first, when it cannot list them all.
ROW_PRIORITY = (FAILED, HELD, RETRYING, INTERRUPTED, RUNNING, CHECKPOINTED, QUEUED, UPSTREAM_FAILED)


@dataclass(slots=True)
class StatusSummary:
    """What the text view of a run shows of its nodes, computed in one pass: counts per state, progress per
    matrix axis, the nodes not in QUIET_STATES, in plan order, with their state and record, and the table
    per step."""

    total: int
    counts: dict[str, int]
    progress: dict[str, dict[str, dict[str, int]]]
    listed: dict[str, tuple[str, NodeRecord]]
    steps: list[StepRow]


def rows_to_show(listed: dict[str, tuple[str, NodeRecord]], limit: int) -> list[str]:
    """At most `limit` of the listed nodes, in plan order: those in ROW_PRIORITY's first states first."""
    if len(listed) <= limit:
        return list(listed)
    rank = {state: position for position, state in enumerate(ROW_PRIORITY)}
    last = len(ROW_PRIORITY)
    ranked = sorted(range(len(listed)), key=[rank.get(state, last) for state, _ in listed.values()].__getitem__)
    chosen = set(ranked[:limit])
    return [name for position, name in enumerate(listed) if position in chosen]


@dataclass(slots=True)
class RunStatus:
    layout: RunLayout
    # The plan, or its index (plan/index.py): a big run's status is read from the index alone, and `plan`
    # loads plan.json the first time it is asked for.
    planned: Plan | PlanIndex
    journal: JournalState
    runner_alive: bool
    engine: str = "local"
    notes: list[str] = field(default_factory=list)  # engine-specific lines for the view (DAGMan job id...)
    extra: dict[str, Any] = field(default_factory=dict)  # engine-specific facts, under "<engine>" in JSON
    resume_hint: str | None = None  # the command that continues this run, when not the local engine's
    # Nodes that go on, or ended, with no runner alive to journal them (the local engine's keeper outlives
    # a killed runner): None while one runs, else its recorded exit code.
    unjournaled: dict[str, int | None] = field(default_factory=dict)
    summary: StatusSummary | None = None  # the text view's, once computed
    _usage: dict[str, NodeUsage] | None = None  # each node's latest usage record, read on first use
    _plan: Plan | None = None
    _index: PlanIndex | None = None

    @property
    def plan(self) -> Plan:
        planned = self.planned
        if isinstance(planned, Plan):
            return planned
        if self._plan is None:
            self._plan = self.layout.load_plan()
        return self._plan

    @property
    def index(self) -> PlanIndex:
        planned = self.planned
        if isinstance(planned, PlanIndex):
            return planned
        if self._index is None:
            self._index = PlanIndex.of(planned)
        return self._index

    @property
    def pipeline(self) -> str:
        return self.planned.pipeline

    @property
    def overrides(self) -> dict[str, Any]:
        return self.planned.overrides

    @property
    def total(self) -> int:
        planned = self.planned
        return len(planned.nodes) if isinstance(planned, Plan) else len(planned)

    def _names(self) -> Collection[str]:
        planned = self.planned
        return planned.nodes if isinstance(planned, Plan) else planned.names

    def usage(self, nodes: Collection[str] | None = None) -> dict[str, NodeUsage]:
        """Each node's latest measured attempt (usage.jsonl; engines write it before status reads it).
        nodes: only these nodes' are needed (the text view of a big run shows few): the records of others
        are not decoded, and may be left out."""
        if self._usage is not None:
            return self._usage
        if nodes is not None and not nodes:
            return {}
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

    def left_behind(self, nodes: dict[str, int | None], holder: str) -> None:
        """Nodes that go on (None), or ended (their exit code), with no runner alive to journal them: what
        `holder` ("its keeper", "HTCondor") still runs of a run whose runner died; shown, and said how to go on."""
        if not nodes:
            return
        self.unjournaled = nodes
        running = sum(1 for rc in nodes.values() if rc is None)
        run_id = self.layout.run_id
        self.notes.append(
            f"its runner died: {holder} still runs {plural(running, 'node')}, {len(nodes) - running} ended since; "
            f"`dagflow run --resume {run_id}` adopts them (so does the command that started it, given again); "
            f"`dagflow cancel {run_id}` stops them"
        )

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
            name: (
                self.state_of(name, records.get(name) or NodeRecord())
                if name in records or name in unjournaled
                else PENDING
            )
            for name in self._names()
        }

    def counts(self, states: dict[str, str] | None = None) -> dict[str, int]:
        counted = Counter((states or self.node_states()).values())
        ordered = {state: counted[state] for state in STATE_ORDER if counted[state]}
        ordered.update((state, count) for state, count in counted.items() if state not in ordered)
        return ordered

    def progress(self, states: dict[str, str] | None = None) -> dict[str, dict[str, dict[str, int]]]:
        """Per matrix axis, per value (e.g. region us): done, failed and total nodes."""
        states = states or self.node_states()
        if not isinstance(self.planned, Plan):
            return _index_progress(self.index, states)
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

    def steps(self, states: dict[str, str] | None = None) -> list[StepRow]:
        """Per step: its nodes' counts by state, its wall time and its slowest node (run/step_table.py); the
        summary's, when no states are given and the summary has it."""
        if states is None and self.summary is not None and self.summary.steps is not None:
            return self.summary.steps
        states = states or self.node_states()
        planned = self.planned
        steps = (node.step for node in planned.nodes.values()) if isinstance(planned, Plan) else planned.node_steps()
        known = {name: (record.started, record.ended) for name, record in self.journal.nodes.items()}
        unknown = (None, None)
        times = [known.get(name, unknown) for name in states]
        return step_rows(list(states), steps, list(states.values()), times, STATE_ORDER)

    def stderr_tail(self, node: str, lines: int = STDERR_TAIL_LINES) -> list[str]:
        """The last lines a node wrote to stderr (its latest attempt's, where the engine keeps one file)."""
        path: Path = self.layout.stderr_path(node)
        try:
            text = read_tail(path, 8192).decode("utf-8", "replace")
        except (OSError, BoundedInputError):
            return []
        return text.splitlines()[-lines:]

    def failed_stderr(self, states: dict[str, str] | None = None) -> dict[str, list[str]]:
        if states is None and self.summary is not None:
            states = {name: state for name, (state, _) in self.summary.listed.items()}
        states = states or self.node_states()
        failed = [name for name, state in states.items() if state == FAILED][:STDERR_TAIL_NODES]
        return {name: tail for name in failed if (tail := self.stderr_tail(name))}

    def promotions(self) -> list[dict[str, Any]]:
        """The run's promotion verdicts (run/promotions.py), read from its run directory as every engine
        leaves them there: what the run's summary says of them, and `status --json`'s promotions."""
        steps = self.summary.steps if self.summary is not None else None
        if steps is not None and not any(row.step.endswith(PROMOTE_SUFFIX) for row in steps):
            return []  # the summary says which steps there are: no promotion node to look for
        nodes = promotion_nodes(self.planned)
        records = self.journal.nodes
        states = {name: self.state_of(name, records.get(name) or NodeRecord()) for name, _ in nodes}
        return promotion_records(self.layout.run_dir, states, nodes)

    def summarize(self) -> StatusSummary:
        """The text view's summary, computed from every node's state once."""
        if self.summary is None:
            states = self.node_states()
            listed = {name: (state, self.record(name)) for name, state in states.items() if state not in QUIET_STATES}
            self.summary = StatusSummary(
                len(states), self.counts(states), self.progress(states), listed, self.steps(states)
            )
        return self.summary

    def to_dict(self) -> dict[str, Any]:
        summary, states = self._json_summary()
        usage = self.usage()
        summary["nodes"] = [
            {**node, "usage": None if (used := usage.get(node["node"])) is None else usage_json(used)}
            for node in self._json_nodes(states)
        ]
        if self.extra:
            summary[self.engine] = self.extra
        return summary

    def write_json(self, out: BinaryIO, chunk: int = 2000) -> None:
        """to_dict() as compact JSON (json.dumps' text of it, UTF-8), written in pieces: the nodes `chunk`
        at a time, each node's usage spliced in as text."""
        summary, states = self._json_summary()

        def write(text: str) -> None:
            out.write(text.encode())

        # json.dumps of a dict is "{" + its items' texts joined by "," + "}": the items before "nodes", then
        # "nodes", then the engine's
        write(json.dumps(summary, separators=(",", ":"))[:-1] + ',"nodes":[')
        for text in self._nodes_texts(states, chunk):
            write(text)
        engine = json.dumps({self.engine: self.extra}, separators=(",", ":"))[1:-1] if self.extra else ""
        write("]" + ("," + engine if engine else "") + "}")

    def _nodes_texts(self, states: dict[str, str], chunk: int) -> Iterator[str]:
        """The text of `status --json`'s nodes (without the brackets), `chunk` nodes a piece."""
        usage = self.usage()
        names = list(states)
        batch: list[dict[str, Any]] = []
        done = 0
        for node in self._json_nodes(states):
            node["usage"] = _USAGE_MARK
            batch.append(node)
            if len(batch) == chunk:
                texts = [usage_text(usage.get(name)) for name in names[done : done + chunk]]
                yield ("," if done else "") + _nodes_text(batch, texts)[1:-1]
                done += len(batch)
                batch = []
        if batch:
            texts = [usage_text(usage.get(name)) for name in names[done:]]
            yield ("," if done else "") + _nodes_text(batch, texts)[1:-1]

    def _json_summary(self) -> tuple[dict[str, Any], dict[str, str]]:
        """`status --json` up to its nodes (the engine's part follows them), and every node's state."""
        states = self.node_states()
        counts, total, progress = self.counts(states), len(states), self.progress(states)
        summary: dict[str, Any] = {
            "run_id": self.run_id,
            "pipeline": self.pipeline,
            "run_dir": str(self.layout.run_dir),
            "engine": self.engine,
            "state": self.state,
            "started": self.journal.started,
            "finished": self.journal.finished_at,
            "counts": counts,
            "total": total,
            "overrides": self.overrides,
            "progress": progress,
            "failed_stderr": self.failed_stderr(states),
            "steps": [row.to_json() for row in self.steps(states)],
            "promotions": self.promotions(),
        }
        return summary, states

    def _json_nodes(self, states: dict[str, str]) -> Iterator[dict[str, Any]]:
        """Each node of `status --json` but its usage."""
        planned = self.planned
        if isinstance(planned, Plan):
            steps_and_coords: Iterator[tuple[str, dict[str, str]]] = (
                (node.step, node.coords) for node in planned.nodes.values()
            )
        else:
            index = planned
            steps_and_coords = zip(index.node_steps(), map(index.coords, range(len(index))), strict=True)
        records = self.journal.nodes
        default = NodeRecord()
        for (name, state), (step, coords) in zip(states.items(), steps_and_coords, strict=True):
            record = records.get(name) or default
            attempts, rc, why, started, ended = record.attempts, record.rc, record.why, record.started, record.ended
            yield {
                "node": name,
                "step": step,
                "coords": coords,
                "state": state,
                "attempts": attempts,
                "restarts": record.restarts,
                "exit_code": rc,
                "why": why,
                "started": started,
                "ended": ended,
            }

    def duration(self, record: NodeRecord) -> float | None:
        if record.started is None:
            return None
        end = record.ended if record.ended is not None else time.time()
        return max(0.0, end - record.started)


# Stands for a node's usage in the text of a batch of nodes, where the usage's own text is put. A value that
# holds it too makes more pieces than nodes: that batch is written the slow way.
_USAGE_MARK = "\x00dagflow usage\x00"
_USAGE_MARK_TEXT = json.dumps(_USAGE_MARK)


def usage_text(usage: NodeUsage | None) -> str:
    """A node's usage as `status --json` writes it."""
    return "null" if usage is None else json.dumps(usage_json(usage), separators=(",", ":"))


def _nodes_text(batch: list[dict[str, Any]], usage_texts: list[str]) -> str:
    """json.dumps(batch) (compact), its nodes' `usage` marks replaced by usage_texts, one each in order."""
    parts = json.dumps(batch, separators=(",", ":")).split(_USAGE_MARK_TEXT)
    if len(parts) != len(batch) + 1:  # the mark also written elsewhere: by the slow way
        for node, text in zip(batch, usage_texts, strict=True):
            node["usage"] = json.loads(text)
        return json.dumps(batch, separators=(",", ":"))
    pieces = [parts[0]]
    for text, part in zip(usage_texts, parts[1:], strict=True):
        pieces.append(text)
        pieces.append(part)
    return "".join(pieces)


def usage_json(usage: NodeUsage) -> dict[str, Any]:
    """A node's latest usage record in `status --json` (the usage.jsonl fields but its name and step)."""
    values = usage_dict(usage)
    del values["node"], values["step"]
    return values


def _index_progress(index: PlanIndex, states: dict[str, str]) -> dict[str, dict[str, dict[str, int]]]:
    """RunStatus.progress from a plan index: counted per axis column, not per node and axis."""
    failed = (FAILED, UPSTREAM_FAILED)
    outcome = [2 if state in DONE_STATES else 1 if state in failed else 0 for state in states.values()]
    axes: dict[str, dict[str, dict[str, int]]] = {}
    # first-seen order of the values, as the per-node count makes it (coords keys in node order)
    for axis, column in index.coord_value_of.items():
        values = index.axis_values[axis]
        tallies = Counter(zip(column, outcome, strict=True))
        seen = dict.fromkeys(value for value in column if value >= 0)
        axes[axis] = {
            values[value]: {
                "done": tallies[value, 2],
                "failed": tallies[value, 1],
                "total": tallies[value, 0] + tallies[value, 1] + tallies[value, 2],
            }
            for value in seen
        }
    return axes


def plan_index_path(layout: RunLayout) -> Path:
    return layout.run_dir / PLAN_INDEX_FILE


def _plan_stamp(layout: RunLayout) -> list[int] | None:
    """What tells plan.json changed: its inode, size and modification time (None: no plan.json). Not its change
    time: a `chmod -R a-w` of a run directory changes nothing that status reads."""
    try:
        found = os.stat(layout.plan_path)
    except OSError:
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def write_plan_index(layout: RunLayout, plan: Plan, stamp: list[int] | None = None) -> PlanIndex:
    """Keep the plan's index beside plan.json (best effort: a run directory this user cannot write keeps
    none, and status reads the plan). stamp: plan.json's stamp from before the plan was read from it."""
    index = PlanIndex.of(plan)
    stamp = stamp or _plan_stamp(layout)
    if stamp is not None:
        with contextlib.suppress(OSError):
            write_replacing(plan_index_path(layout), index.to_json(plan=stamp).encode())
    return index


def load_plan_index(layout: RunLayout, keep: bool = False) -> PlanIndex:
    """The run's plan index: from its file when that was made from the plan.json there now, else built from
    the plan (and kept, when `keep`: an engine's ingest; a status read writes nothing). Raises
    RunNotFoundError as RunLayout.load_plan does."""
    stamp = _plan_stamp(layout)
    if stamp is not None:
        try:
            data = json.loads(plan_index_path(layout).read_bytes())
            if isinstance(data, dict) and data.get("plan") == stamp:
                return PlanIndex.from_dict(data)
        except (OSError, ValueError, RecursionError):
            pass  # missing, damaged or of another format: built again
    plan = layout.load_plan()
    return write_plan_index(layout, plan, stamp) if keep else PlanIndex.of(plan)


def write_replacing(path: Path, data: bytes) -> None:
    """Replace `path` with `data` through a temporary file and a rename: a reader sees the old file or the
    new one. Not synced to disk: for derived files (indexes, caches), which their readers check."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            os.fchmod(handle.fileno(), 0o644)
            handle.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def read_status(layout: RunLayout, index: bool = False) -> RunStatus:
    """The run directory's status, read without writing: the plan (its index where `index`: a big plan
    takes seconds to read), the journal, and what an engine's ingest observed beside it (run/observed.py)."""
    planned = load_plan_index(layout) if index else layout.load_plan()
    # The lock before the journal: a runner that ends between the two reads shows as running, not as a run
    # its runner left unfinished (its finish event is in the journal once it has released the lock).
    locked = is_locked(layout.lock_path)
    journal = read_journal(layout.journal_path)
    observed = read_observed(layout.run_dir)
    status = RunStatus(layout, planned, journal, locked)
    if observed is not None:
        observed.apply(journal)
        status.runner_alive, status.engine = locked or observed.alive, observed.engine
        status.notes, status.extra, status.resume_hint = observed.notes, observed.extra, observed.resume_hint
    if journal.bad_lines:  # said once, here, rather than failing on each
        status.notes.append(f"skipped {journal.bad_lines} malformed line(s) in {layout.journal_path}")
        status.extra["journal_malformed_lines"] = journal.bad_lines
    return status
