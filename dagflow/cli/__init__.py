"""The `dagflow` command line.

main() answers a bare `dagflow --version`, `dagflow --help` or `dagflow validate FILE` from cli/quick.py,
before typer is imported;
every other command line goes to the typer app (cli/commands.py), whose command modules import what a
command needs only when it runs, so that completion and --help of a command load no pipeline model,
engine or plan either. tests/test_cli_startup.py holds the modules each of these loads.
"""

from __future__ import annotations

import sys
from typing import Any


def main() -> None:
    from dagflow.cli.quick import answer

    code = answer(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    from dagflow.cli.commands import run

    run()


def __getattr__(name: str) -> Any:
    if name == "app":  # the typer app with every command registered: `from dagflow.cli import app`
        from dagflow.cli.commands import register

        app = globals()["app"] = register()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
