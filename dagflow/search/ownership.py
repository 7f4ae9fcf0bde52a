"""Which trial a run directory belongs to: `trial.json` beside plan.json, written once, right after the
engine prepared the run and before anything starts it.

Trial run ids (`<search>-t<N>[-<region>]`) repeat across searches of one name (another database, a
deleted one), so a run directory of that name proves nothing. A scheduler adopts a run (its state,
its result) only when trial.json records this very trial: the search's name and its database's id for
it, the region, the number and the exact params. Any other run directory is left alone and the trial
gets a fresh run id.
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json
from dagflow.run.layout import SEARCH_TRIAL_FILE
from dagflow.search.store import Trial, trial_run_id

TRIAL_FILE = SEARCH_TRIAL_FILE


def identity(search_id: str, trial: Trial) -> dict[str, Any]:
    return {
        "search": trial.search,
        "search_id": search_id,
        "region": trial.region,
        "number": trial.number,
        "params": trial.params,
    }


def _canonical(value: Mapping[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def owns(run_dir: Path, expected: Mapping[str, Any]) -> bool:
    """Whether run_dir records exactly this trial (a missing or damaged trial.json proves nothing)."""
    try:
        recorded = loads_json((run_dir / TRIAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, BoundedInputError):
        return False
    return isinstance(recorded, dict) and _canonical(recorded) == _canonical(expected)


def record_owner(run_dir: Path, owner: Mapping[str, Any]) -> bool:
    """Write trial.json into a freshly prepared run; False when one is there already (never replaced)."""
    try:
        fd = os.open(run_dir / TRIAL_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(_canonical(owner) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    return True


def fresh_run_id(trial: Trial) -> str:
    """The trial's usual run id with a random suffix: for when that name is taken by some other run."""
    return f"{trial_run_id(trial.search, trial.number, trial.region)}-{secrets.token_hex(3)}"
