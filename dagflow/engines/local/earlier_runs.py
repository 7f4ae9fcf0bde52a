"""What earlier local runs of the same pipeline still do, for a plain `dagflow run` about to start a new one.

A runner killed with kill -9 (or stopped by a full disk) leaves its keeper behind: the nodes it started
keep running, and their exits are recorded in `procs.jsonl` with no runner to journal them or to record
them in the cache. A new run with a new id would start those nodes a second time, beside the first copy,
and rerun the ones that finished after the kill. So before a plain run starts, the runs directory is read
for runs of the same pipeline (the same workdir and pipeline file) that are

- *cut short*: no runner holds the run's lock, and a node process the keeper started is still alive, or
  an exit the keeper recorded is missing from the journal. The new run continues that run instead
  (engine.py), which adopts the live nodes and takes the recorded results, exactly as `--resume` does;
- *running*: a live runner holds the lock. A second runner of the very same nodes would train every model
  twice at once, so the new run is refused.

A run whose journal ends with the runner's `finish` event is settled and skipped after reading its last
line; only the rare unsettled run has its journal folded and its plan read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.local.recovery import unjournaled_nodes
from dagflow.plan import Plan
from dagflow.run.journal import is_finish_line
from dagflow.run.layout import DRY_RUN_FILE, SEARCH_TRIAL_FILE, RunLayout, RunNotFoundError, list_runs
from dagflow.run.lock import holder_pid, is_locked

_TAIL_BYTES = 4096  # the finish event is one short line


@dataclass(frozen=True, slots=True)
class CutShort:
    layout: RunLayout
    plan: Plan
    pending: frozenset[str]  # nodes with a live process, or with an exit the journal lacks


@dataclass(frozen=True, slots=True)
class LiveRun:
    layout: RunLayout
    plan: Plan
    runner_pid: int | None


@dataclass(frozen=True, slots=True)
class EarlierRuns:
    cut_short: list[CutShort]
    running: list[LiveRun]


def pipeline_identity(plan: Plan) -> tuple[str, str]:
    """(workdir, pipeline file) of a plan, both resolved: what makes two runs runs of one pipeline."""
    workdir = os.path.realpath(plan.workdir)
    source = Path(plan.source)
    if not source.is_absolute():  # relative to where `dagflow run` ran; the workdir is its directory
        source = Path(workdir) / source.name
    return workdir, os.path.realpath(source)


def earlier_runs(plan: Plan, runs_dir: Path, engine: str = "local") -> EarlierRuns:
    """Unsettled runs of plan's pipeline that engine (the local one, or one built on it) made under runs_dir,
    newest first."""
    identity = pipeline_identity(plan)
    found = EarlierRuns([], [])
    for run_id in reversed(list_runs(runs_dir)):
        layout = RunLayout(runs_dir, run_id)
        if run_id == plan.run_id or not _may_be_unsettled(layout, engine):
            continue
        locked = is_locked(layout.lock_path)
        pending = frozenset() if locked else frozenset(unjournaled_nodes(layout))
        if not locked and not pending:
            continue
        try:
            earlier = layout.load_plan()
        except RunNotFoundError:  # unreadable: not a run this one can continue or collide with
            continue
        if pipeline_identity(earlier) != identity:
            continue
        if locked:
            found.running.append(LiveRun(layout, earlier, holder_pid(layout.lock_path)))
        else:
            found.cut_short.append(CutShort(layout, earlier, pending))
    return found


def _may_be_unsettled(layout: RunLayout, engine: str) -> bool:
    run_dir = layout.run_dir
    if (run_dir / SEARCH_TRIAL_FILE).exists() or (run_dir / DRY_RUN_FILE).exists():
        return False
    if (layout.recorded_engine() or "local") != engine:
        return False
    return not _ends_with_finish(layout.journal_path)


def _ends_with_finish(journal: Path) -> bool:
    try:
        with open(journal, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return False
    return is_finish_line(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
