"""Engine choice and engine options on the command line, built from the engine registry.

Each engine declares its options (engines/base.py EngineOption); every command that starts or continues a
run gets the union of them as flags (as Snakemake's executor plugins do), and an option given with an
engine that does not declare it is refused, naming the engine(s) that do.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, get_args

import typer
from typer.models import OptionInfo

from dagflow.cli.common import NO_PARAMS_SOURCE, ParamsSource, fail, load_plan_or_exit
from dagflow.engines.base import EngineOption
from dagflow.engines.registry import EngineChoiceError, engine_names, engine_options
from dagflow.errors import DagflowError

if TYPE_CHECKING:
    from dagflow.plan import Plan
    from dagflow.run.reports import Report

SETTINGS_PARAMETER = "engine_settings"  # the decorated command's parameter receiving the given options


class EngineUsageError(DagflowError):
    pass


@dataclass(frozen=True, slots=True)
class DeclaredOption:
    option: EngineOption
    engines: tuple[str, ...]  # every engine declaring it (an option name means one thing everywhere)


def declared_options(command: str, own_flags: frozenset[str] = frozenset()) -> dict[str, DeclaredOption]:
    """The options of every importable engine that apply to command, by settings name. Engines are read in
    the registry's order, built-in ones first: a later option that takes an earlier one's name with other
    flags, or a flag already taken (by another option, or in own_flags, the command's own), is passed over
    with a warning, so that one plugin's clash breaks no command."""
    found = _declared.get(command)
    if found is not None:
        return found
    found = {}
    taken: dict[str, str] = dict.fromkeys(own_flags, "")  # flag -> its option's name ("": the command's own)
    for name in engine_names():
        try:
            options = engine_options(name)
        except EngineChoiceError:  # its optional dependency is missing: its flags are simply not offered
            continue
        for option in options:
            if command not in option.commands:
                continue
            known = found.get(option.name)
            clash = _clash(command, option, known, taken, found)
            if clash:
                if (name, option.name) not in _warned:  # once a process, though several commands offer it
                    _warned.add((name, option.name))
                    print(f"warning: ignoring option {option.name} ({', '.join(option.flags)}) of the {name} "
                          f"engine: {clash}", file=sys.stderr)
                continue
            taken.update(dict.fromkeys(option.flags, option.name))
            engines = (*known.engines, name) if known else (name,)
            found[option.name] = DeclaredOption(known.option if known else option, engines)
    _declared[command] = found
    return found


_declared: dict[str, dict[str, DeclaredOption]] = {}  # each command's, read once a process
_warned: set[tuple[str, str]] = set()  # (engine, option) passed over and said so


def _clash(
    command: str, option: EngineOption, known: DeclaredOption | None, taken: dict[str, str],
    found: dict[str, DeclaredOption],
) -> str:
    """Why option cannot be offered beside those found so far ("" if it can)."""
    if known is not None:
        if (known.option.flags, known.option.type) != (option.flags, option.type):
            return (f"the {known.engines[0]} engine declares {option.name} as {', '.join(known.option.flags)}"
                    + ("" if known.option.type is option.type else f" of type {known.option.type.__name__}"))
        return ""
    for flag in option.flags:
        owner = taken.get(flag)
        if owner == "":
            return f"{flag} is a flag of `dagflow {command}` itself"
        if owner is not None:
            return f"{flag} is the {found[owner].engines[0]} engine's option {owner}"
    return ""


def _unset(option: EngineOption) -> Any:
    return False if option.type is bool else None


def _parameter(declared: DeclaredOption) -> inspect.Parameter:
    option = declared.option
    value_type: Any = option.type
    if option.type is list:
        value_type = list[str] | None
    elif option.type is not bool:
        value_type = option.type | None
    owners = ", ".join(declared.engines)
    text = option.help if option.help.startswith(f"{owners}:") else f"{owners}: {option.help}"
    if option.default not in (None, False, ()):
        text = text.rstrip(".") + f" (default: {option.default})."
    extra: dict[str, Any] = {"min": option.min} if option.min is not None else {}
    if option.metavar:
        extra["metavar"] = option.metavar
    flag = typer.Option(*option.flags, help=text, show_default=False, **extra)
    return inspect.Parameter(
        option.name, inspect.Parameter.KEYWORD_ONLY, default=_unset(option), annotation=Annotated[value_type, flag]
    )


def with_engine_options(command: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Give a command every engine's options for it as flags; the command receives the ones given, as a dict
    by option name, in its `engine_settings` parameter."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function, eval_str=True)
        own = [parameter for name, parameter in signature.parameters.items() if name != SETTINGS_PARAMETER]
        declared = declared_options(command, _flags_of(own))

        @functools.wraps(function)
        def wrapper(**kwargs: Any) -> Any:
            given = {}
            for name, item in declared.items():
                value = kwargs.pop(name, None)
                if value not in (None, False, [], ()):
                    given[name] = tuple(value) if item.option.type is list else value
            return function(**kwargs, **{SETTINGS_PARAMETER: given})

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*own, *(_parameter(item) for item in declared.values())]
        )
        return wrapper

    return decorate


def _flags_of(parameters: list[inspect.Parameter]) -> frozenset[str]:
    """The flags a command's own parameters take (typer's default for an option that names none), and --help."""
    flags = {"--help"}
    for parameter in parameters:
        infos = [*get_args(parameter.annotation)[1:], parameter.default]
        for info in infos:
            if isinstance(info, OptionInfo):
                # typer.Option("--json") inside Annotated keeps its first flag as the default
                decls = [info.default] if isinstance(info.default, str) else []
                decls += info.param_decls or ()
                named = [flag for decl in decls for flag in decl.split("/") if flag.startswith("-")]
                flags.update(named or [f"--{parameter.name.replace('_', '-')}"])
    return frozenset(flags)


def check_engine_settings(engine: str, given: dict[str, Any], command: str) -> None:
    """Refuse options the engine does not declare (exit 2), naming the engines that do."""
    declared = declared_options(command)
    wrong = [declared[name] for name in given if engine not in declared[name].engines]
    if wrong:
        flags = ", ".join(item.option.flags[0] for item in wrong)
        owners = sorted({engine for item in wrong for engine in item.engines})
        fail(EngineUsageError(f"{flags}: only for --engine {' or '.join(owners)}, not {engine}"))


def checked_engine(value: str | None) -> str | None:
    """Callback of every --engine option: a registered engine, or a usage error (exit 2)."""
    if value is not None and value not in engine_names():
        raise typer.BadParameter(f"unknown engine {value!r}; choose one of {', '.join(engine_names())}")
    return value


def engine_option(default: str) -> Any:
    """An --engine option whose help lists the registered engines."""
    return typer.Option(
        "--engine", help=f"Where the nodes run: {', '.join(engine_names())} (default: {default}).",
        callback=checked_engine, show_default=False,
    )


def load_plan_for(
    pipeline: Path,
    run_id: str | None,
    engine: str,
    only: list[str] | None = None,
    sets: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    params_source: ParamsSource = NO_PARAMS_SOURCE,
) -> Plan:
    """Load and expand a pipeline with its --only, --set and search params, checked by the engine's spec check
    with its settings (the options given), warning on stderr about each step field the engine will ignore."""
    return load_plan_or_exit(
        pipeline, run_id, honoured_by=engine, only=only, sets=sets, engine_settings=settings,
        params_source=params_source,
    )  # fmt: skip


def print_report(report: Report, json_output: bool) -> None:
    import json

    if json_output:
        print(json.dumps(report.data, separators=(",", ":")))
        return
    for note in report.notes:
        print(note, file=sys.stderr)
    for line in report.lines:
        print(line)
    if report.text:
        sys.stdout.write(report.text)
