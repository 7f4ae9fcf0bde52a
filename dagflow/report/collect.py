"""Everything a run report shows, read from the run directory through the engine-neutral readers.

Node states come from the engine that made the run (`read_run_status`), resources from usage.jsonl,
metrics from the nodes' metrics files, promotion verdicts from `promotions/`, and, for a search's
trial run, the search's trials from its database.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json, read_bounded
from dagflow.engines.registry import read_run_status
from dagflow.plan import Plan
from dagflow.plan.searched import SearchedParams, TrialChoice
from dagflow.run.journal import NodeRecord
from dagflow.run.layout import SEARCH_TRIAL_FILE, RunLayout
from dagflow.run.status import RunStatus
from dagflow.run.step_table import StepRow
from dagflow.run.usage import NodeUsage, read_usage

MAX_METRICS_FILES = 2000  # metrics files read per report: each is a file to open


@dataclass(slots=True)
class RunReport:
    run_id: str
    run_dir: Path
    pipeline: str
    engine: str
    state: str
    started: float | None
    finished: float | None
    plan: Plan
    states: dict[str, str]
    records: dict[str, NodeRecord]
    counts: dict[str, int]
    usage: list[NodeUsage]
    notes: list[str]
    metrics: dict[str, dict[str, Any]]  # node -> its metrics file's (last) object
    metrics_skipped: int  # nodes with a metrics file past MAX_METRICS_FILES
    promotions: list[dict[str, Any]]
    search: dict[str, Any] | None = None  # the search's summary (dagflow.search.report.summarise)
    # where the params came from when a finished search chose them, and the trial each model (train node) took
    searched: SearchedParams | None = None
    model_trials: dict[str, TrialChoice] = field(default_factory=dict)
    steps: list[StepRow] = field(default_factory=list)  # per step: counts by state, wall time, slowest node
    made: float = field(default_factory=time.time)


def collect(status: RunStatus, search_db: Path | None = None) -> RunReport:
    from dagflow.run.promotions import promotion_records
    from dagflow.run.provenance import model_trials, searched_params

    layout = status.layout
    states = status.node_states()
    metrics, skipped = read_metrics(status.plan)
    return RunReport(
        run_id=status.run_id,
        run_dir=layout.run_dir,
        pipeline=status.plan.pipeline,
        engine=status.engine,
        state=status.state,
        started=status.journal.started,
        finished=status.journal.finished_at,
        plan=status.plan,
        states=states,
        records=status.journal.nodes,
        counts=status.counts(),
        usage=read_usage(layout.run_dir),
        notes=list(status.notes),
        metrics=metrics,
        metrics_skipped=skipped,
        promotions=promotion_records(layout.run_dir, states),
        search=search_of_run(layout, search_db) if search_db is not None else None,
        steps=status.steps(states),
        searched=searched_params(status.plan),
        model_trials=model_trials(status.plan),
    )


def collect_run(layout: RunLayout, search_db: Path | None = None) -> RunReport:
    """The run's report, as `dagflow status` reads it: what its engine observed ingested first."""
    return collect(read_run_status(layout, ingest=True), search_db)


def read_metrics(plan: Plan) -> tuple[dict[str, dict[str, Any]], int]:
    """Each node's metrics (the file's object, or its last JSON line); missing or unreadable files are left out."""
    from dagflow.search.progress import last_object

    workdir = Path(plan.workdir)
    found: dict[str, dict[str, Any]] = {}
    with_metrics = [node for node in plan.nodes.values() if node.metrics]
    for node in with_metrics[:MAX_METRICS_FILES]:
        path = Path(node.metrics or "")
        if not path.is_absolute():
            path = workdir / path
        try:
            data = last_object(read_bounded(path).decode("utf-8", errors="replace"))
        except (OSError, BoundedInputError):
            continue
        if isinstance(data, dict):
            found[node.name] = data
    return found, max(0, len(with_metrics) - MAX_METRICS_FILES)


def search_of_run(layout: RunLayout, db: Path) -> dict[str, Any] | None:
    """The summary of the search a trial run belongs to, when its trial.json and the database say so."""
    try:
        owner = loads_json((layout.run_dir / SEARCH_TRIAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, BoundedInputError):
        return None
    if not isinstance(owner, dict) or not isinstance(owner.get("search"), str):
        return None
    summary = search_summary(db, owner["search"])
    if summary is not None:
        summary["this_trial"] = {"number": owner.get("number"), "region": owner.get("region") or None}
    return summary


def search_summary(db: Path, name: str) -> dict[str, Any] | None:
    from dagflow.search.report import summarise
    from dagflow.search.store import SearchStore

    if not db.is_file():
        return None
    store = SearchStore(db)
    try:
        record = store.search(name)
        return None if record is None else summarise(record, store.trials(name))
    finally:
        store.close()
