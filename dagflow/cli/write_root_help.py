"""Writes cli/root_help.py, what a bare `dagflow --help` prints (cli/quick.py), from the typer app:
`python -m dagflow.cli.write_root_help` after changing a command's help or the root's options."""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import typer

from dagflow.cli.commands import COMMAND_MODULES, click_command, register


def root_help_source(command: Any, context: Any) -> str:
    """cli/root_help.py's text for command, typer's click group of the app (cli/commands.py click_command),
    read in context (its click context); refused (ValueError) where the root help has more than cli/quick.py
    prints (an argument, a short or negative flag, a default, a hidden command, a panel, an epilog...)."""
    help_text = inspect.cleandoc(command.help or "").partition("\f")[0]
    first, *rest = help_text.split("\n\n")
    first = first.strip() if first.startswith("\b") else first.replace("\n", " ").strip()
    options = []
    for param in command.get_params(context):
        shown = [
            param.secondary_opts, param.required, param.envvar, getattr(param, "rich_help_panel", None),
            param._get_number_range_help_str(), _default_shown(param, context),
            any("--" not in flag for flag in param.opts),
        ]
        if param.param_type_name != "option" or getattr(param, "hidden", False) or any(shown):
            raise ValueError(f"cli/quick.py cannot print {param.opts}")
        paragraphs = [
            part.replace("\n", " ").strip() if not part.startswith("\b") else "{}\n".format(part.strip("\b\n"))
            for part in (param.help or "").split("\n\n")
        ]
        options.append((",".join(param.opts), param.display_type_rich(ctx=context), "\n".join(paragraphs).strip()))
    commands = []
    for name in command.list_commands(context):
        sub = command.get_command(context, name)
        if sub.hidden or sub.deprecated or getattr(sub, "rich_help_panel", None):
            raise ValueError(f"cli/quick.py cannot list the command {name}")
        lead = inspect.cleandoc(sub.short_help or sub.help or "").split("\n\n")[0]
        commands.append((name, inspect.cleandoc(lead.replace("\b\n", "")).strip(), _module_of(sub)))
    texts = [first, *rest, *(row[2] for row in options), *(row[1] for row in commands)]
    if command.epilog or command.deprecated or any("\033[" in text for text in texts):
        raise ValueError("cli/quick.py cannot print an epilog, a deprecation or ANSI codes")
    rest_text = inspect.cleandoc("\n\n".join(rest)) if rest else None
    return (
        '"""The root help of `dagflow --help` (cli/quick.py), written by `python -m dagflow.cli.write_root_help`\n'
        'from the typer app: edit the commands, then run it. COMMANDS: (name, help, the command module\n'
        'registering it)."""\n'
        '# ruff: noqa: E501\n\n'
        f"USAGE = {command.get_usage(context)!r}\n"
        f"HELP = {(inspect.cleandoc(first), rest_text)!r}\n"
        f"OPTIONS = {_lines(options)}\n"
        f"COMMANDS = {_lines(commands)}\n"
    )


def _module_of(command: Any) -> str:
    """The command module (cli/commands.py COMMAND_MODULES) that registers command, a top-level one."""
    callback = command.callback
    if getattr(command, "commands", None):  # a group: where its subcommands are
        callback = next(iter(command.commands.values())).callback
    package, _, module = callback.__module__.rpartition(".")
    if package != "dagflow.cli" or module not in COMMAND_MODULES:
        raise ValueError(f"the command {command.name} is not registered by one of the command modules")
    return module


def _default_shown(param: Any, context: Any) -> bool:
    """Whether typer's help shows a default for param (as typer/rich_utils.py _get_parameter_help decides)."""
    default = param._extract_default_help_str(ctx=context)
    given_as_text = isinstance(param.show_default, str)
    if not (given_as_text or (default is not None and (param.show_default or context.show_default))):
        return False
    return bool(param._get_default_string(ctx=context, show_default_is_str=given_as_text, default_value=default))


def _lines(rows: list[tuple[str, ...]]) -> str:
    return "(\n" + "".join(f"    {row!r},\n" for row in rows) + ")"


if __name__ == "__main__":
    register()
    root = click_command()
    path = os.path.join(os.path.dirname(__file__), "root_help.py")
    with open(path, "w", encoding="utf-8") as out:
        out.write(root_help_source(root, typer.Context(root, info_name="dagflow")))
    print(f"wrote {path}", file=sys.stderr)
