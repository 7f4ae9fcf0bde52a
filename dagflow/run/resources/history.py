"""Past runs of a pipeline and what their nodes used (each run dir's usage.jsonl, dagflow/run/usage.py).

Runs are found under the runs directories a pipeline's runs go to: `.dagflow/runs` of the working
directory (where `dagflow run` puts them by default) and of the pipeline file's directory, or the ones
given. A run belongs to the pipeline when its plan names it; a run id of the default form
`<pipeline>-YYYYmmdd-HHMMSS-xxxx` says so without reading plan.json (which can be large). Only the
newest MAX_RUNS runs with usage records are read, so planning stays fast however long the history.
Records are untrusted: lines that are not sane records are skipped (dagflow/run/usage.py), and each
run keeps which, so that every reader of history can report them (`skipped_warnings`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dagflow.run.layout import DEFAULT_RUNS_DIR, pipeline_runs_dir, unique_dirs
from dagflow.run.usage import USAGE_FILE, NodeUsage, read_usage_checked

MAX_RUNS = 50
MAX_WARNINGS = 10  # skipped records named one by one; the rest are counted


@dataclass(frozen=True, slots=True)
class RunUsage:
    run_id: str
    run_dir: Path
    records: list[NodeUsage]
    skipped: list[tuple[int, str]] = field(default_factory=list)  # (line of usage.jsonl, why) of insane lines


def default_runs_dirs(pipeline_file: Path) -> list[Path]:
    """Where runs of this pipeline file are looked for when no --runs-dir is given: beside it (where they go),
    and here (where they went before dagflow kept them beside the pipeline, or with --runs-dir .dagflow/runs)."""
    return unique_dirs([Path.cwd() / DEFAULT_RUNS_DIR, pipeline_runs_dir(Path(pipeline_file).absolute())])


def pipeline_history(pipeline: str, runs_dirs: Iterable[Path], limit: int = MAX_RUNS) -> list[RunUsage]:
    """The newest `limit` runs of `pipeline` that recorded usage, oldest first."""
    default_id = re.compile(rf"{re.escape(pipeline)}-\d{{8}}-\d{{6}}-[0-9a-f]{{4}}")
    found: list[tuple[float, Path]] = []
    seen: set[str] = set()
    for runs_dir in runs_dirs:
        for run_dir, mtime in _runs_with_usage(Path(runs_dir)):
            real = os.path.realpath(run_dir)
            if real in seen:
                continue
            seen.add(real)
            found.append((mtime, run_dir))
    found.sort()
    history: list[RunUsage] = []
    for _, run_dir in reversed(found):
        if len(history) >= limit:
            break
        if not (default_id.fullmatch(run_dir.name) or _plan_pipeline(run_dir) == pipeline):
            continue
        records, skipped = read_usage_checked(run_dir)
        if records or skipped:
            history.append(RunUsage(run_dir.name, run_dir, records, skipped))
    history.reverse()
    return history


def _runs_with_usage(runs_dir: Path) -> list[tuple[Path, float]]:
    try:
        entries = list(os.scandir(runs_dir))
    except OSError:
        return []
    runs = []
    for entry in entries:
        try:
            mtime = os.stat(os.path.join(entry.path, USAGE_FILE)).st_mtime
        except OSError:
            continue
        runs.append((Path(entry.path), mtime))
    return runs


def _plan_pipeline(run_dir: Path) -> str | None:
    try:
        with open(run_dir / "plan.json", "rb") as handle:
            plan = json.load(handle)
    except (OSError, ValueError):
        return None
    name = plan.get("pipeline") if isinstance(plan, dict) else None
    return name if isinstance(name, str) else None


def records_by_step(history: Sequence[RunUsage]) -> dict[str, list[tuple[str, NodeUsage]]]:
    """(run id, record) pairs per step, in history order."""
    steps: dict[str, list[tuple[str, NodeUsage]]] = {}
    for run in history:
        for record in run.records:
            steps.setdefault(record.step, []).append((run.run_id, record))
    return steps


def skipped_warnings(history: Sequence[RunUsage]) -> list[str]:
    """A line per usage record the history skipped, `<run>/usage.jsonl:<line>: <why>; record skipped`, the
    first MAX_WARNINGS of them, then one line counting the rest."""
    lines = [f"{run.run_dir / USAGE_FILE}:{line}: {why}; record skipped"
             for run in history for line, why in run.skipped]  # fmt: skip
    if len(lines) <= MAX_WARNINGS:
        return lines
    return [*lines[:MAX_WARNINGS], f"{len(lines) - MAX_WARNINGS} more usage record(s) skipped"]
