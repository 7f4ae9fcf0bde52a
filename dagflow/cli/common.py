"""Helpers shared by command modules: turn user errors into clean messages and exit codes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from dagflow.errors import DagflowError, SpecError

# Options several commands share, spelled and documented once.
RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="Where runs live.", show_default=True, file_okay=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def fail(error: DagflowError) -> NoReturn:
    if isinstance(error, SpecError):
        for diagnostic in error.diagnostics:
            print(diagnostic.render(), file=sys.stderr)
        count = len(error.diagnostics)
        print(f"{count} error{'s' if count != 1 else ''} found", file=sys.stderr)
    else:
        print(f"error: {error}", file=sys.stderr)
    raise typer.Exit(error.exit_code)


def load_plan_or_exit(path: Path, run_id: str | None = None):  # -> Plan
    """Load, validate and expand a pipeline file; on bad input print every diagnostic and exit 2."""
    from dagflow.plan.expand import expand
    from dagflow.spec import load_spec

    try:
        spec = load_spec(path)
        return expand(spec, run_id=run_id)
    except DagflowError as error:
        fail(error)
