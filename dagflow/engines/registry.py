"""The one registry of engines: name -> its declaration (engines/base.py EngineDeclaration), the engine
itself imported only when chosen.

Engines are plugins: each is found through the `dagflow.engines` entry-point group, the built-in ones
(dagflow's own pyproject.toml) exactly as an engine installed from another package, so a third-party
engine reaches `dagflow run --engine NAME` and every other caller by being installed. Every caller (the
CLI, the search scheduler, status, schedules) picks engines here. An engine's declaration is imported only
when that engine is asked about; one that cannot be imported (a missing optional dependency such as
htcondor2, a broken plugin) is an error only for the engine that needs it: "the NAME engine is not
available here", where it is chosen, never a traceback, and the callers that go through every engine (the
flags, the spec checks) pass it over. The built-in engines' names are dagflow's: a plugin declaring one is
refused, with a warning naming its distribution. `register_engine` adds one at run time (tests, embedding
programs).

The engine that ran a run is recorded once, when its run directory is created (`<run_dir>/engine`, see
RunLayout.create); every command that continues the run reads it back with engine_of_run, and
read_run_status reads any run's status the way the engine that made it says.

spec_checks gives every loader of a pipeline file what the engines add to it (spec/sections.py): their
sections (blocks and step fields, validated with the document) and their declared spec checks
(engines/base.py): each engine checks its own fields once, at load, and its problems are reported with the
document's.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dagflow.engines.base import Capabilities, Engine, EngineDeclaration, EngineOption
from dagflow.errors import DagflowError, Diagnostic

if TYPE_CHECKING:  # not imported to list engines and their options (the CLI's flags, --help)
    from dagflow.run.layout import RunLayout
    from dagflow.run.live_runs import Live
    from dagflow.run.session import RunSession
    from dagflow.run.status import RunStatus
    from dagflow.spec.load import Spec, SpecCheck
    from dagflow.spec.sections import EngineSection, EngineSections

# An engine's spec check, as its declaration names it: (spec, its settings or None) -> the problems found.
EngineSpecCheck = Callable[["Spec", Mapping[str, Any] | None], list[Diagnostic]]

ENTRY_POINT_GROUP = "dagflow.engines"
DEFAULT_ENGINE = "local"  # also what a run with no record and no marker was made by
BUILTIN_DISTRIBUTION = "dagflow"  # whose entry points are the built-in engines


class EngineChoiceError(DagflowError):
    pass


_registered: dict[str, EngineDeclaration] = {}  # register_engine's, over the installed ones


@functools.cache
def _installed() -> dict[str, str]:
    """Every engine the dagflow.engines entry points name -> what it names (the default first, then the other
    built-in ones), read once a process, nothing imported. A plugin's entry point that takes a built-in engine's
    name is refused (which one would win would depend on sys.path order), with a warning naming its distribution."""

    # (point, its distribution's name): each name read once (it parses the distribution's METADATA)
    points = [(point, _distribution(point)) for point in entry_points(group=ENTRY_POINT_GROUP)]
    points.sort(key=lambda item: (item[0].name != DEFAULT_ENGINE, item[1] != BUILTIN_DISTRIBUTION))
    builtins = {point.name for point, distribution in points if distribution == BUILTIN_DISTRIBUTION}
    found: dict[str, str] = {}
    for point, distribution in points:
        builtin = distribution == BUILTIN_DISTRIBUTION
        if point.name in builtins and not builtin:
            print(f"warning: ignoring the {point.name!r} engine of the {distribution} distribution: "
                  f"{point.name!r} is a built-in engine of dagflow's; a plugin must take a name of its own",
                  file=sys.stderr)
        elif builtin or point.name not in found:
            found[point.name] = point.value
    if not found:
        raise EngineChoiceError(
            "no engines are registered: dagflow's package metadata is missing (install it: pip install -e .)"
        )
    return found


def _distribution(point: EntryPoint) -> str:
    return point.dist.name if point.dist is not None else "unknown"




@functools.cache
def _declaration(name: str, value: str) -> EngineDeclaration:
    """What an entry point names: a declaration, or (a minimal plugin) the engine class itself."""
    loaded = _import(name, value)
    if isinstance(loaded, EngineDeclaration):
        return loaded
    return EngineDeclaration(value, tuple(getattr(loaded, "options", ())))


def register_engine(
    name: str, target: str, legacy_marker: str | None = None, spec_check: str | None = None,
    section: str | None = None,
) -> None:
    """Add (or replace) an engine: target is "module:Class", the class implementing engines.base.Engine;
    spec_check "module:function", its spec check, section "module:attribute", its parts of the pipeline file
    (engines/base.py)."""
    for given in (target, spec_check, section):
        if given is not None and ":" not in given:
            raise ValueError(f"engine target {given!r} must be 'module:attribute'")
    _registered[name] = EngineDeclaration(target, legacy_marker=legacy_marker, spec_check=spec_check,
                                          section=section)


def unregister_engine(name: str) -> None:
    _registered.pop(name, None)


def engine_names() -> list[str]:
    return list(dict.fromkeys([*_installed(), *_registered]))


def _entry(name: str) -> EngineDeclaration:
    """name's declaration, imported now if it was not (EngineChoiceError: unknown, or not available here)."""
    if name in _registered:
        return _registered[name]
    value = _installed().get(name)
    if value is None:
        raise EngineChoiceError(f"unknown engine {name!r}; choose one of {', '.join(engine_names())}")
    return _declaration(name, value)


def _available() -> Iterator[tuple[str, EngineDeclaration]]:
    """Every engine whose declaration imports here, with it; the others are passed over."""
    for name in engine_names():
        try:
            yield name, _entry(name)
        except EngineChoiceError:
            continue


def _import(name: str, target: str) -> Any:
    module, _, attribute = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attribute)
    except Exception as error:  # a plugin may fail in any way on import: it is unavailable, never a traceback
        raise EngineChoiceError(f"the {name} engine is not available here: {error}") from None


def engine_class(name: str) -> type[Engine]:
    return _import(name, _entry(name).target)


def load_engine(name: str, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> Engine:
    """An engine ready to use: runs_dir is where its runs live, settings its options by name."""
    return engine_class(name)(runs_dir, settings or {})  # type: ignore[call-arg]


def engine_options(name: str) -> tuple[EngineOption, ...]:
    """The options an engine declares (its declaration's, or for one registered at run time, its class's)."""
    entry = _entry(name)
    if name in _registered:
        return tuple(engine_class(name).options)
    return entry.options


def engine_capabilities(name: str) -> Capabilities:
    return _entry(name).capabilities


def engine_feature(name: str, feature: str) -> Any:
    """What an engine provides beyond the contract (its declaration's `provides`): the module, or the
    module's attribute, it names for feature; imported only now, when asked for."""
    target = dict(_entry(name).provides).get(feature)
    if target is None:
        raise EngineChoiceError(f"the {name} engine does not provide {feature!r}")
    if ":" in target:
        return _import(name, target)
    try:
        return importlib.import_module(target)
    except ImportError as error:
        raise EngineChoiceError(f"the {name} engine is not available here: {error}") from None


def engine_provides(name: str, feature: str) -> bool:
    """Whether the engine's declaration provides `feature` (engine_feature would give it)."""
    return feature in dict(_entry(name).provides)


def spec_checks(engine: str | None = None, settings: Mapping[str, Any] | None = None) -> EngineSections:
    """What load_spec is given for a pipeline that `engine` (None: no engine in particular, as `dagflow
    validate` checks) will run with `settings` (its options by name; the rest take their defaults): every
    available engine's section, its check of its own fields as the document writes them, and the chosen
    engine's check with its settings as well."""
    from dagflow.spec.sections import EngineSections

    if engine is not None:
        _entry(engine)  # the chosen engine must be available
    sections: list[tuple[str, EngineSection]] = []
    checks: list[SpecCheck] = []
    for name, entry in _available():
        try:
            section = _section(name, entry)
            check: EngineSpecCheck | None = _import(name, entry.spec_check) if entry.spec_check else None
        except EngineChoiceError:
            if name == engine:
                raise
            continue  # an engine that cannot run here (its client library missing) adds and checks nothing here
        if section is not None:
            sections.append((name, section))
        if check is None:
            continue
        if name == engine:
            chosen = {option.name: option.default for option in engine_options(name)} | dict(settings or {})
            checks.append(functools.partial(check, settings=chosen))
        else:
            checks.append(functools.partial(check, settings=None))
    return EngineSections(tuple(sections), tuple(checks))


def _section(name: str, entry: EngineDeclaration) -> EngineSection | None:
    """The engine's parts of the pipeline file, checked to be what the declaration says."""
    from dagflow.spec.sections import EngineSection

    if entry.section is None:
        return None
    section = _import(name, entry.section)
    if not isinstance(section, EngineSection):
        raise EngineChoiceError(f"the {name} engine is not available here: its section {entry.section} is not "
                                "an EngineSection")
    return section


def engine_of_run(layout: RunLayout) -> str:
    """The engine that made a run: its record, else (runs from before the record) its engine's marker."""
    recorded = layout.recorded_engine()
    if recorded is not None:
        return recorded
    for name, entry in _available():
        if entry.legacy_marker is not None and (layout.run_dir / entry.legacy_marker).exists():
            return name
    return DEFAULT_ENGINE


def engine_for_run(layout: RunLayout, settings: Mapping[str, Any] | None = None) -> Engine:
    """The engine that continues an existing run."""
    return load_engine(engine_of_run(layout), layout.runs_dir, settings)


def live_run(layout: RunLayout) -> Live | None:
    """What of a run of any engine is still live, as the engine that made it says (run/live_runs.py)."""
    try:
        engine = engine_for_run(layout)
    except DagflowError:  # its engine is not installed here: nothing here can run or see its nodes
        return None
    live = getattr(engine, "live", None)  # an engine written before the contract had it says nothing
    return live(layout) if live is not None else None


def run_session(engine: Engine) -> RunSession:
    """The run session that starts and continues runs on engine, past the live-run rule over every engine's
    runs (run/session.py): how the CLI, schedules and the search scheduler reach an engine's runs."""
    from dagflow.run.session import RunSession

    return RunSession(engine, live_run, spec_checks)


def read_run_status(layout: RunLayout, ingest: bool = False) -> RunStatus:
    """Status of a run of any engine, read the way the engine that made it says, writing nothing. ingest:
    first fold in what the engine observed since its last ingest (Engine.ingest), where this user may write
    the run directory (`dagflow status`, the search scheduler); a read-only one is read as it is."""
    engine = engine_for_run(layout)
    if ingest and os.access(layout.run_dir, os.W_OK):
        engine_ingest = getattr(engine, "ingest", None)  # an engine written before the contract had it: none
        try:
            if engine_ingest is not None:
                engine_ingest(layout.run_dir)
        except OSError as error:  # a full disk, a file of another user's: read what is there
            print(f"dagflow: run {layout.run_id} not ingested: {error}", file=sys.stderr)
    status = engine.read_status(layout)
    status.engine = engine.name
    if status.overrides:
        from dagflow.plan.overrides import Overrides

        status.notes.insert(0, f"overrides: {Overrides.from_dict(status.overrides).describe()}")
    return status
