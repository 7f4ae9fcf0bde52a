"""Help texts as written in the source, made to read well in `--help` at any terminal width."""

from __future__ import annotations

import inspect
from typing import Any

from rich.markup import escape


def tidy_help(command: Any) -> None:
    """Tidy the help of command (a click command or group), its parameters and every subcommand.

    Docstrings are wrapped at the source's line width, and typer keeps those line breaks, so at 80
    columns a paragraph comes out ragged; here each paragraph becomes one line for rich to wrap. Help
    is rich markup to typer, so `[default: ...]` in a help string would vanish as an unknown style tag:
    it is escaped to show as written.
    """
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
    return escape(reflow(text))


def reflow(text: str) -> str:
    """text with each paragraph (a blank line ends one) on one line; a paragraph starting with `\\b`
    (click's "do not rewrap" mark) is kept as it is."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(
        paragraph if paragraph.startswith("\b") else " ".join(line.strip() for line in paragraph.splitlines())
        for paragraph in paragraphs
    )
