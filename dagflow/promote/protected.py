"""Which runs are behind a promoted model: the run a pointer names now (its `run_id`), among the runs whose
promotion verdicts moved that pointer. `dagflow runs gc` never removes those. A pointer that cannot be read
(S3 unreachable, a damaged file) protects every run that promoted to it: removing too little is the safe
way to be wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from dagflow.bounded import BoundedInputError, loads_json, read_bounded
from dagflow.errors import DagflowError
from dagflow.promote.decide import PROMOTED
from dagflow.promote.promote import parse_pointer
from dagflow.promote.store import Store
from dagflow.run.promotions import PROMOTIONS_DIR


def promoted_runs(run_dirs: Iterable[Path]) -> dict[Path, str]:
    """Of run_dirs, those behind a model a pointer names now: run dir -> the pointer."""
    promoters: dict[str, list[Path]] = {}  # pointer -> the runs that promoted to it
    for run_dir in run_dirs:
        for pointer in _promoted_to(Path(run_dir)):
            promoters.setdefault(pointer, []).append(Path(run_dir))
    store = Store()
    behind: dict[Path, str] = {}
    for pointer, runs in promoters.items():
        try:
            current = parse_pointer(store.read(pointer), pointer)
            named = current.get("run_id") if current is not None else None
        except (DagflowError, OSError):
            named = None
            behind.update((run_dir, pointer) for run_dir in runs)
        behind.update((run_dir, pointer) for run_dir in runs if run_dir.name == named)
    return behind


def _promoted_to(run_dir: Path) -> list[str]:
    """The pointers (absolute, or URLs) the run's promotion nodes moved."""
    try:
        verdicts = list((run_dir / PROMOTIONS_DIR).glob("*.json"))
    except OSError:
        return []
    pointers = []
    for path in verdicts:
        try:
            verdict = loads_json(read_bounded(path))
        except (OSError, BoundedInputError):
            continue
        if isinstance(verdict, dict) and verdict.get("verdict") == PROMOTED and isinstance(verdict.get("pointer"), str):
            pointers.append(_absolute(verdict["pointer"], run_dir))
    return pointers


def _absolute(pointer: str, run_dir: Path) -> str:
    """A local pointer is relative to where the promotion node ran: the run's workdir."""
    if "://" in pointer or os.path.isabs(pointer):
        return pointer
    try:
        workdir = json.loads((run_dir / "plan.json").read_text(encoding="utf-8")).get("workdir", ".")
    except (OSError, ValueError, AttributeError):
        workdir = "."
    return os.path.join(workdir, pointer)
