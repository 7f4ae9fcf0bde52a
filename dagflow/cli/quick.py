"""A bare `dagflow --version`, `dagflow --help` or `dagflow validate FILE`, answered before typer is imported
(cli/__init__.py). Validate is what an editor or a pre-commit hook runs on every save: without typer (and the
pydantic adapters it builds for each parameter) it costs about a third less.

Importing typer and building its command tree costs more than the answer itself. --help prints the root
help as typer's rich help does (typer/rich_utils.py rich_format_help, for a group with options and commands
in their default panels) from cli/root_help.py, which `python -m dagflow.cli.write_root_help` writes from
the typer app; tests/test_cli_startup.py checks that both print the same text, at several widths, with and without
colour. Whatever else (another argument, typer's environment variables, completion) goes to typer.
"""

from __future__ import annotations

import os
from typing import Any

# Typer's own settings read from the environment (typer/core.py, typer/rich_utils.py): with any of them
# (and during shell completion) typer answers itself.
_TYPER_PREFIXES = ("TYPER_", "_TYPER", "_DAGFLOW_COMPLETE")

# typer/rich_utils.py's styles, as far as the root help uses them.
_THEME = {
    "option": "bold cyan",
    "switch": "bold green",
    "negative_option": "bold magenta",
    "negative_switch": "bold red",
    "types": "bold yellow",
    "types_sep": "dim",
    "usage": "yellow",
}


def package_version() -> str:
    """The installed distribution's version; the source tree's when dagflow runs uninstalled."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dagflow")
    except PackageNotFoundError:
        from dagflow import __version__

        return __version__


def answer(argv: list[str]) -> int | None:
    """Answer argv if it is a bare --version, --help or `validate FILE` (and typer's settings are the defaults):
    the exit code; None for typer to answer."""
    if any(name.startswith(_TYPER_PREFIXES) for name in os.environ):
        return None
    if len(argv) == 2 and argv[0] == "validate" and not argv[1].startswith("-"):
        from pathlib import Path

        from dagflow.cli.validate_file import validate_file

        return validate_file(Path(argv[1]), None)
    if argv == ["--version"]:
        print(f"dagflow {package_version()}")
    elif argv == ["--help"]:
        print_root_help()
        print()  # what click's --help echoes after typer has printed the help
    else:
        return None
    return 0


def print_root_help() -> None:
    from rich.align import Align
    from rich.columns import Columns
    from rich.console import Console, Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text
    from rich.theme import Theme

    from dagflow.cli import root_help

    options, negative, types = _highlighters()
    width = os.environ.get("TERMINAL_WIDTH")
    force_terminal = True if os.environ.get("GITHUB_ACTIONS") or os.environ.get("FORCE_COLOR") or os.environ.get(
        "PY_COLORS"
    ) else None
    console = Console(
        theme=Theme(_THEME), highlighter=options, color_system="auto", force_terminal=force_terminal,
        width=int(width) if width else None,
    )
    console.print(Padding(options(root_help.USAGE), 1), style="bold")
    first, rest = root_help.HELP
    text: list[Any] = [options(Text.from_markup(first, style=""))]
    if rest is not None:
        text += [Text(""), options(Text.from_markup(rest, style="dim"))]
    console.print(Padding(Align(Group(*text), pad=False), (0, 1, 1, 1)))

    table_style: dict[str, Any] = {
        "show_header": False, "expand": True, "box": None, "show_lines": False, "leading": 0,
        "border_style": None, "row_styles": None, "pad_edge": False, "padding": (0, 1),
    }
    option_rows = Table(highlight=True, **table_style)
    for flags, type_name, help_text in root_help.OPTIONS:
        kind = Text(style="bold yellow", overflow="fold")
        kind.append(type_name)
        help_column = Columns([options(Text.from_markup(help_text, style=""))])
        option_rows.add_row(options(flags), options(""), negative(""), negative(""), types(kind), help_column)
    console.print(Panel(option_rows, border_style="dim", title="Options", title_align="left"))

    command_rows = Table(highlight=False, **table_style)
    command_rows.add_column(style="bold cyan", no_wrap=True, width=max(len(name) for name, *_ in root_help.COMMANDS))
    command_rows.add_column("Description", justify="left", no_wrap=False, ratio=10)
    for name, help_text, _ in root_help.COMMANDS:
        command_rows.add_row(Text(name), options(Text.from_markup(help_text, style="")))
    console.print(Panel(command_rows, border_style="dim", title="Commands", title_align="left"))


def _highlighters() -> tuple[Any, Any, Any]:
    """typer/rich_utils.py's option, negative option and type highlighters."""
    from rich.highlighter import RegexHighlighter

    class OptionHighlighter(RegexHighlighter):
        highlights = (
            r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
            r"(?P<types>\<[^\>]+\>)",
            r"(?P<usage>Usage: )",
        )

    class NegativeOptionHighlighter(RegexHighlighter):
        highlights = (
            r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
            r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        )

    class TypesHighlighter(RegexHighlighter):
        highlights = (
            r"^(?P<types_sep>(\[|<))",
            r"(?P<types_sep>\|)",
            r"(?P<types_sep>(\]|>))(\.\.\.)?$",
        )

    return OptionHighlighter(), NegativeOptionHighlighter(), TypesHighlighter()
