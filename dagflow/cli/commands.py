"""The typer app with its commands registered, and how the command line runs it.

A command module registers its commands when imported. A command line that names a command registers only
the module holding it (cli/root_help.py COMMANDS says which), so that a command pays for no other
command's declarations; one that names none (--install-completion, completion, a mistyped command) and
`from dagflow.cli import app` register every module.

Help texts are written in the source's line width, and typer keeps those line breaks, so at 80 columns a
paragraph would come out ragged: click_command makes each paragraph one line for rich to wrap (tidy_help).
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer

from dagflow.cli.messages import print_json_error
from dagflow.cli.root import app

# In the order `dagflow --help` lists their commands.
COMMAND_MODULES = (
    "spec_cmds",
    "condor_cmds",
    "run_cmds",
    "submit_cmds",
    "runs_cmds",
    "transfer_cmds",
    "schedule_cmds",
    "agent_cmds",
    "autoscale_cmds",
    "search_cmds",
    "resources_cmds",
    "report_cmds",
)


def register(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The app with the commands of modules (names in COMMAND_MODULES) registered."""
    for module in modules:
        importlib.import_module(f"dagflow.cli.{module}")
    return app


def modules_for(argv: Sequence[str]) -> tuple[str, ...]:
    """The command modules a command line needs: the one holding the command it names, else all."""
    from dagflow.cli.root_help import COMMANDS

    owner = {name: module for name, _, module in COMMANDS}
    return (owner[argv[0]],) if argv and argv[0] in owner else COMMAND_MODULES


def click_command() -> typer.main.TyperGroup:
    """The click command tree typer builds from the app, with its help tidied."""
    command = typer.main.get_command(app)
    tidy_help(command)
    return command  # type: ignore[return-value]


def tidy_help(command: Any) -> None:
    """Tidy the help of command (a click command or group), its parameters and every subcommand: each
    paragraph on one line. Help is rich markup to typer, so `[default: ...]` in a help string would vanish
    as an unknown style tag: it is escaped to show as written."""
    if command.help:
        command.help = _tidy(command.help)
    if command.short_help:
        command.short_help = _tidy(command.short_help)
    for param in command.params:
        if getattr(param, "help", None):
            param.help = _tidy(param.help)
    for subcommand in getattr(command, "commands", {}).values():
        tidy_help(subcommand)


def _tidy(text: str) -> str:
    """text with each paragraph (a blank line ends one) on one line, escaped; a paragraph starting with
    `\\b` (click's "do not rewrap" mark) is kept as it is."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return escape_markup("\n\n".join(
        paragraph if paragraph.startswith("\b") else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs
    ))


# rich.markup.escape's rule, so that a command that runs imports no rich (about a twentieth of `dagflow submit`'s
# CPU): a backslash run before what rich would read as a tag is doubled and the tag escaped, and a lone
# trailing backslash doubled. tests/test_cli_startup.py holds it to rich's on every help text.
_MARKUP_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?])")


def escape_markup(text: str) -> str:
    """text escaped as rich.markup.escape escapes it."""
    text = _MARKUP_TAG.sub(lambda match: f"{match[1]}{match[1]}\\{match[2]}", text)
    return text + "\\" if text.endswith("\\") and not text.endswith("\\\\") else text


def run() -> None:
    register(modules_for(sys.argv[1:]))
    # Not standalone: click's own usage errors (a bad option value, a missing argument) come back here,
    # so that with --json they are printed as JSON like every other error.
    command = click_command()
    try:
        code = command(prog_name="dagflow", standalone_mode=False)
    except typer.TyperException as error:  # click's usage errors (typer bundles its own click)
        _show_usage_error(error)
        sys.exit(getattr(error, "exit_code", 2))
    except typer.Abort:
        print("Aborted!", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _show_usage_error(error: typer.TyperException) -> None:
    if "--json" in sys.argv[1:]:  # parsing stopped at the error: whether --json was read is unknown
        print_json_error(getattr(error, "format_message", error.__str__)(), getattr(error, "exit_code", 2))
        return
    try:
        from typer import rich_utils
    except ImportError:  # typer without rich
        error.show()  # type: ignore[attr-defined]
    else:
        rich_utils.rich_format_error(error)
