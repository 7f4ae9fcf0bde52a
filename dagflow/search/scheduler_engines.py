"""Which engine runs the trials: a small registry of Engine factories, by name.

Every engine implements dagflow.engines.base.Engine (prepare / submit / status / cancel); the
scheduler needs nothing else from it. Batch engines are imported only when chosen, so a missing
one (or its missing bindings) is a clear error for that choice alone. `register_engine` adds one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.base import Engine
from dagflow.errors import DagflowError


class EngineChoiceError(DagflowError):
    pass


@dataclass(frozen=True, slots=True)
class EngineSettings:
    runs_dir: Path
    jobs: int | None = None  # local engine: nodes of one trial running at once
    gpus: str | None = None  # local engine: GPU devices trials may use, e.g. "0,1"


EngineFactory = Callable[[EngineSettings], Engine]


def _local(settings: EngineSettings) -> Engine:
    from dagflow.engines.local import LocalEngine, RunOptions

    return LocalEngine(RunOptions(runs_dir=settings.runs_dir, jobs=settings.jobs, gpus=settings.gpus))


def _by_path(target: str) -> EngineFactory:
    """A factory for an engine class that takes no arguments, given as "module:Class"."""

    def factory(settings: EngineSettings) -> Engine:
        module, name = target.split(":")
        try:
            engine_class = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            raise EngineChoiceError(f"the {target} engine is not available here: {error}") from None
        return engine_class()

    return factory


_ENGINES: dict[str, EngineFactory] = {
    "local": _local,
    "slurm": _by_path("dagflow.engines.slurm:SlurmEngine"),
    "condor": _by_path("dagflow.engines.condor.engine:CondorEngine"),
}


def register_engine(name: str, factory: EngineFactory) -> None:
    _ENGINES[name] = factory


def engine_names() -> list[str]:
    return list(_ENGINES)


def make_engine(name: str, settings: EngineSettings) -> Engine:
    factory = _ENGINES.get(name)
    if factory is None:
        raise EngineChoiceError(f"unknown engine {name!r}; choose one of {', '.join(_ENGINES)}")
    return factory(settings)
