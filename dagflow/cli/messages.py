"""How the command line prints errors and spec warnings, without typer: a plain `dagflow validate FILE` uses
these before typer is imported (cli/quick.py), every command through cli/common.py's fail().

With --json, an error is one JSON object on one line of stderr (stdout keeps only results):
{"error": "...", "exit_code": 2, "where": "file:line:col" or null, "diagnostics": [...]}; see README.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

from dagflow.errors import DagflowError, Diagnostic, SpecError

# Set while a command given --json runs: fail() then prints errors as JSON.
JSON_ERRORS: ContextVar[bool] = ContextVar("dagflow_json_errors", default=False)


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


def show_error(error: DagflowError) -> None:
    """An error as the command line shows it: each located diagnostic and their count, or one line; JSON
    under --json."""
    if JSON_ERRORS.get():
        _fail_json(error)
    elif isinstance(error, SpecError):
        for diagnostic in error.diagnostics:
            print(diagnostic.render(), file=sys.stderr)
        count = len(error.diagnostics)
        print(f"{count} error{'s' if count != 1 else ''} found", file=sys.stderr)
    else:
        print(f"error: {error}", file=sys.stderr)


def _fail_json(error: DagflowError) -> None:
    if isinstance(error, SpecError) and error.diagnostics:
        first, more = error.diagnostics[0], len(error.diagnostics) - 1
        message = f"{first.path or '<document>'}: {first.message}" + (f" (and {more} more)" if more else "")
        print_json_error(message, error.exit_code, error.diagnostics)
    else:
        print_json_error(str(error), error.exit_code)


def print_spec_warnings(spec, engine: str | None = None) -> int:  # spec: dagflow.spec.Spec
    """Print the spec's warnings, and with engine those about fields it ignores, on stderr; how many."""
    warnings = list(spec.warnings)
    if engine is not None:
        from dagflow.engines.registry import engine_class
        from dagflow.spec.engine_fields import ignored_fields

        warnings += ignored_fields(spec, frozenset(engine_class(engine).honours), engine)
    for warning in warnings:
        if JSON_ERRORS.get():
            line = json.dumps({"warning": warning.message, "where": warning.location(), "field": warning.path})
        else:
            line = f"warning: {warning.render()}"
        print(line, file=sys.stderr)
    return len(warnings)
