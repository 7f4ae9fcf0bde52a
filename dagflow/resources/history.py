"""Past runs of a pipeline and what their nodes used (each run dir's usage.jsonl, dagflow/run/usage.py).

Runs are found under the runs directories a pipeline's runs go to: `.dagflow/runs` of the working
directory (where `dagflow run` puts them by default) and of the pipeline file's directory, or the ones
given. A run belongs to the pipeline when its plan names it; a run id of the default form
`<pipeline>-YYYYmmdd-HHMMSS-xxxx` says so without reading plan.json (which can be large). Only the
newest MAX_RUNS runs with usage records are read, so planning stays fast however long the history.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagflow.run.layout import DEFAULT_RUNS_DIR
from dagflow.run.usage import USAGE_FILE, NodeUsage, read_usage

MAX_RUNS = 50


@dataclass(frozen=True, slots=True)
class RunUsage:
    run_id: str
    run_dir: Path
    records: list[NodeUsage]


def default_runs_dirs(pipeline_file: Path) -> list[Path]:
    """Where runs of this pipeline file are looked for when no --runs-dir is given."""
    candidates = [Path.cwd() / DEFAULT_RUNS_DIR, Path(pipeline_file).absolute().parent / DEFAULT_RUNS_DIR]
    unique: dict[str, Path] = {}
    for path in candidates:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


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
        records = read_usage(run_dir)
        if records:
            history.append(RunUsage(run_dir.name, run_dir, records))
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
