"""Every run dagflow knows of, and the one a run id (or a unique prefix of one) names, from any directory.

Known runs: those in the user's index (run/index.py), every run in the runs dirs they live in (runs made
before the index, or whose line was lost) and in the runs dirs a command looks in from here. A run id is
looked for, in order: as given in the runs dirs seen from here; as given anywhere known; as a prefix of
one known run id; then where an engine says it ran (`elsewhere`: the schedd knows a condor run's id and
directory). Two runs a name fits is an error naming both (exit 2), as is one it fits none of.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from dagflow.run.ids import validate_run_id
from dagflow.run.index import INDEX_FILE, indexed_runs, state_dir
from dagflow.run.layout import ENGINE_FILE, RunLayout, RunNotFoundError, list_runs, locate_run, unique_dirs

_SHOWN = 5  # runs an ambiguity names

Elsewhere = Callable[[str], list[Path]]  # a run id prefix -> run directories an engine knows of


class AmbiguousRunError(RunNotFoundError):
    """A run id prefix that fits more than one run (exit code 2)."""


@dataclass(frozen=True, slots=True)
class KnownRun:
    layout: RunLayout
    pipeline: str
    started: float  # wall time the run directory was made

    @property
    def run_id(self) -> str:
        return self.layout.run_id


def known_runs(extra_dirs: Iterable[Path] = ()) -> list[KnownRun]:
    """Every known run, oldest first; extra_dirs are runs dirs to look in besides the index's."""
    entries = {os.path.realpath(entry.dir): entry for entry in indexed_runs()}
    runs_dirs = unique_dirs([*(Path(d).absolute() for d in extra_dirs), *(e.run_dir.parent for e in entries.values())])
    found: dict[str, KnownRun] = {}
    for runs_dir in runs_dirs:
        for run_id in list_runs(runs_dir):
            layout = RunLayout(runs_dir, run_id)
            real = os.path.realpath(layout.run_dir)
            if real in found:
                continue
            entry = entries.get(real)
            if entry is not None:
                found[real] = KnownRun(layout, entry.pipeline, entry.t)
            else:
                found[real] = KnownRun(layout, _pipeline_name(layout), _made_at(layout))
    return sorted(found.values(), key=lambda run: (run.started, run.run_id))


def resolve_run(run_id: str, seen_from_here: Sequence[Path], elsewhere: Elsewhere | None = None) -> RunLayout:
    """The one run run_id names (see the module docstring); RunNotFoundError or AmbiguousRunError."""
    validate_run_id(run_id)
    try:
        return locate_run(seen_from_here, run_id)
    except RunNotFoundError as not_here:
        missing = not_here
    runs = known_runs(seen_from_here)
    chosen = _one_of([run.layout for run in runs], run_id)
    if chosen is None and elsewhere is not None:
        found = [RunLayout.from_run_dir(path) for path in elsewhere(run_id)]
        chosen = _one_of([layout for layout in found if layout.exists()], run_id)
    if chosen is None:
        raise RunNotFoundError(f"{missing}; no run in the index of runs ({state_dir() / INDEX_FILE}) is named "
                               f"{run_id!r} or starts with it (`dagflow runs` lists them)")
    return chosen


def _one_of(layouts: list[RunLayout], run_id: str) -> RunLayout | None:
    """The one layout named run_id, else the one whose id starts with it; None when none fits."""
    for fits in (lambda name: name == run_id, lambda name: name.startswith(run_id)):
        matches = [layout for layout in layouts if fits(layout.run_id)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            shown = ", ".join(f"{layout.run_id} ({layout.run_dir})" for layout in matches[:_SHOWN])
            more = f" and {len(matches) - _SHOWN} more" if len(matches) > _SHOWN else ""
            raise AmbiguousRunError(
                f"{run_id!r} names {len(matches)} runs: {shown}{more}; give more of the run id, or "
                "--runs-dir DIR/.dagflow/runs"
            )
    return None


def _pipeline_name(layout: RunLayout) -> str:
    try:
        with open(layout.plan_path, "rb") as handle:
            name = json.load(handle).get("pipeline")
    except (OSError, ValueError, AttributeError):
        return "?"
    return name if isinstance(name, str) else "?"


def _made_at(layout: RunLayout) -> float:
    """When the run directory was made: its engine record is written once, then (older runs) its plan."""
    for path in (layout.run_dir / ENGINE_FILE, layout.plan_path):
        try:
            return path.stat().st_mtime
        except OSError:
            continue
    return 0.0
