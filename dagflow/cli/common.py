"""Helpers shared by command modules: turn user errors into clean messages and exit codes.

With --json, an error is one JSON object on one line of stderr (stdout keeps only results):
{"error": "...", "exit_code": 2, "where": "file:line:col" or null, "diagnostics": [...]}; see README.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from dagflow.errors import DagflowError, Diagnostic, SpecError

# Set while a command given --json runs: fail() then prints errors as JSON.
_JSON_ERRORS: ContextVar[bool] = ContextVar("dagflow_json_errors", default=False)


def note_json(ctx: typer.Context, value: bool) -> bool:
    """Callback of every --json option; the note ends with the command (tests run many in one process)."""
    if value:
        token = _JSON_ERRORS.set(True)
        ctx.call_on_close(lambda: _JSON_ERRORS.reset(token))
    return value


# Options several commands share, spelled and documented once.
RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="Where runs live.", show_default=True, file_okay=False)]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine-readable output (errors too: one JSON object).", callback=note_json)
]


def checked_run_id(value: str | None) -> str | None:
    """Callback of every --run-id option: the id is checked as the command line is read."""
    from dagflow.run.ids import RunIdError, validate_run_id

    if value is None:
        return None
    try:
        return validate_run_id(value)
    except RunIdError as error:
        raise typer.BadParameter(str(error)) from None


def error_object(message: str, exit_code: int, diagnostics: Sequence[Diagnostic] = ()) -> dict[str, Any]:
    first = diagnostics[0] if diagnostics else None
    return {
        "error": message,
        "exit_code": exit_code,
        "where": first.location() if first else None,
        "diagnostics": [_diagnostic_object(d) for d in diagnostics],
    }


def print_json_error(message: str, exit_code: int, diagnostics: Sequence[Diagnostic] = ()) -> None:
    print(json.dumps(error_object(message, exit_code, diagnostics), ensure_ascii=False), file=sys.stderr)


def _diagnostic_object(diagnostic: Diagnostic) -> dict[str, Any]:
    return {
        "where": diagnostic.location(),
        "file": diagnostic.file,
        "line": diagnostic.line,
        "column": diagnostic.column,
        "field": diagnostic.path,
        "message": diagnostic.message,
        "allowed": diagnostic.allowed,
        "hint": diagnostic.hint,
    }


def fail(error: DagflowError) -> NoReturn:
    if _JSON_ERRORS.get():
        _fail_json(error)
    elif isinstance(error, SpecError):
        for diagnostic in error.diagnostics:
            print(diagnostic.render(), file=sys.stderr)
        count = len(error.diagnostics)
        print(f"{count} error{'s' if count != 1 else ''} found", file=sys.stderr)
    else:
        print(f"error: {error}", file=sys.stderr)
    raise typer.Exit(error.exit_code)


def _fail_json(error: DagflowError) -> None:
    if isinstance(error, SpecError) and error.diagnostics:
        first, more = error.diagnostics[0], len(error.diagnostics) - 1
        message = f"{first.path or '<document>'}: {first.message}" + (f" (and {more} more)" if more else "")
        print_json_error(message, error.exit_code, error.diagnostics)
    else:
        print_json_error(str(error), error.exit_code)


def load_plan_or_exit(path: Path, run_id: str | None = None, honoured_by: str | None = None):  # -> Plan
    """Load, validate and expand a pipeline file; on bad input print every diagnostic and exit 2.

    Warnings (a deprecated key; with honoured_by, each step field that engine ignores) go to stderr.
    """
    from dagflow.plan.expand import expand
    from dagflow.run.ids import validate_run_id
    from dagflow.spec import load_spec

    try:
        if run_id is not None:
            validate_run_id(run_id)  # before it names a directory ({run.id} in paths, the run directory)
        spec = load_spec(path)
        print_spec_warnings(spec, honoured_by)
        return expand(spec, run_id=run_id)
    except DagflowError as error:
        fail(error)


def print_spec_warnings(spec, engine: str | None = None) -> int:  # spec: dagflow.spec.Spec
    """Print the spec's warnings, and with engine those about fields it ignores, on stderr; how many."""
    warnings = list(spec.warnings)
    if engine is not None:
        from dagflow.engines.registry import engine_class
        from dagflow.spec.engine_fields import ignored_fields

        warnings += ignored_fields(spec, frozenset(engine_class(engine).honours), engine)
    for warning in warnings:
        if _JSON_ERRORS.get():
            line = json.dumps({"warning": warning.message, "where": warning.location(), "field": warning.path})
        else:
            line = f"warning: {warning.render()}"
        print(line, file=sys.stderr)
    return len(warnings)
