"""Which engine runs the trials: the scheduler's settings mapped onto the central engine registry.

Every engine implements dagflow.engines.base.Engine; the scheduler starts and continues trials through the
run session (run/session.py) and launches and cancels them with the engine. Engines, their lazy loading
and `register_engine` live in dagflow/engines/registry.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.base import Engine
from dagflow.engines.registry import EngineChoiceError, engine_class, engine_names, load_engine

__all__ = ["EngineChoiceError", "EngineSettings", "engine_names", "make_engine"]


@dataclass(frozen=True, slots=True)
class EngineSettings:
    runs_dir: Path
    jobs: int | None = None  # local engine: nodes of one trial running at once
    gpus: str | None = None  # local engine: GPU devices trials may use, e.g. "0,1"


def make_engine(name: str, settings: EngineSettings) -> Engine:
    """The named engine with those of the scheduler's settings it declares as options."""
    declared = {option.name for option in engine_class(name).options}
    given = {key: value for key, value in (("jobs", settings.jobs), ("gpus", settings.gpus)) if value is not None}
    return load_engine(name, settings.runs_dir, {key: value for key, value in given.items() if key in declared})
