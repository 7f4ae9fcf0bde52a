"""The one registry of engines: name -> "module:Class", imported only when chosen.

Every caller (the CLI, the search scheduler, status) picks engines here. A missing optional dependency
(htcondor2, a Slurm client) is an error only for the engine that needs it. A new engine is one package
and one line in BUILTIN_ENGINES (or a `register_engine` call from a plugin).

The engine that ran a run is recorded once, when its run directory is created (`<run_dir>/engine`, see
RunLayout.create); every command that continues the run reads it back with engine_of_run.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagflow.engines.base import Engine, EngineOption
from dagflow.errors import DagflowError
from dagflow.run.layout import RunLayout


class EngineChoiceError(DagflowError):
    pass


@dataclass(frozen=True, slots=True)
class EngineEntry:
    target: str  # "module:Class"
    # A file or directory marking a run this engine made before runs recorded their engine; None: none.
    legacy_marker: str | None = None
    # "module:NAME" of the engine's option declarations, importable without the engine (the CLI builds
    # every command's flags from all engines' options: importing every engine cost each command about
    # 0.1 s). None: the engine class's own `options`.
    options: str | None = None


BUILTIN_ENGINES: dict[str, EngineEntry] = {
    "local": EngineEntry(
        "dagflow.engines.local.contract:LocalEngineContract", options="dagflow.engines.local.settings:LOCAL_OPTIONS"
    ),
    "condor": EngineEntry(
        "dagflow.engines.condor.engine:CondorEngine", legacy_marker="condor/run.json",
        options="dagflow.engines.condor.settings:CONDOR_OPTIONS",
    ),
    "slurm": EngineEntry(
        "dagflow.engines.slurm.engine:SlurmEngine", legacy_marker="slurm",
        options="dagflow.engines.slurm.settings:SLURM_OPTIONS",
    ),
    "sge": EngineEntry(
        "dagflow.engines.sge.engine:SgeEngine", legacy_marker="sge", options="dagflow.engines.sge.settings:SGE_OPTIONS"
    ),
}  # fmt: skip
DEFAULT_ENGINE = "local"  # also what a run with no record and no marker was made by

_ENGINES: dict[str, EngineEntry] = dict(BUILTIN_ENGINES)


def register_engine(name: str, target: str, legacy_marker: str | None = None) -> None:
    """Add (or replace) an engine: target is "module:Class", the class implementing engines.base.Engine."""
    if ":" not in target:
        raise ValueError(f"engine target {target!r} must be 'module:Class'")
    _ENGINES[name] = EngineEntry(target, legacy_marker)


def unregister_engine(name: str) -> None:
    if name in BUILTIN_ENGINES:
        _ENGINES[name] = BUILTIN_ENGINES[name]
    else:
        _ENGINES.pop(name, None)


def engine_names() -> list[str]:
    return list(_ENGINES)


def _entry(name: str) -> EngineEntry:
    entry = _ENGINES.get(name)
    if entry is None:
        raise EngineChoiceError(f"unknown engine {name!r}; choose one of {', '.join(_ENGINES)}")
    return entry


def _import(name: str, target: str) -> Any:
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise EngineChoiceError(f"the {name} engine is not available here: {error}") from None


def engine_class(name: str) -> type[Engine]:
    return _import(name, _entry(name).target)


def load_engine(name: str, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> Engine:
    """An engine ready to use: runs_dir is where its runs live, settings its options by name."""
    return engine_class(name)(runs_dir, settings or {})  # type: ignore[call-arg]


def engine_options(name: str) -> tuple[EngineOption, ...]:
    """The options an engine declares, without importing the engine where its entry names them apart."""
    entry = _entry(name)
    if entry.options is None:
        return tuple(engine_class(name).options)
    return tuple(_import(name, entry.options))


def engine_of_run(layout: RunLayout) -> str:
    """The engine that made a run: its record, else (runs from before the record) its engine's marker."""
    recorded = layout.recorded_engine()
    if recorded is not None:
        return recorded
    for name, entry in _ENGINES.items():
        if entry.legacy_marker is not None and (layout.run_dir / entry.legacy_marker).exists():
            return name
    return DEFAULT_ENGINE


def engine_for_run(layout: RunLayout, settings: Mapping[str, Any] | None = None) -> Engine:
    """The engine that continues an existing run."""
    return load_engine(engine_of_run(layout), layout.runs_dir, settings)
