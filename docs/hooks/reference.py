"""An mkdocs hook: the reference pages, made from dagflow itself at every build so they cannot drift.

`reference/cli.md` is each command's own `--help` (the command tree walked as `dagflow` builds it) and
`reference/schema.md` is `dagflow schema`, as a table per object and as the JSON document. Both are
produced by running the CLI in this process, exactly as `dagflow ... --help` and `dagflow schema` print.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Iterator
from typing import Any
from unittest import mock

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

WIDTH = "100"  # columns the help is laid out for


def cli_output(*args: str) -> str:
    """What `dagflow ARGS` prints on stdout, run in this process (no colour, a fixed width)."""
    from dagflow.cli import app  # noqa: F401  (registers every command)
    from dagflow.cli.commands import click_command

    command = click_command()
    out = io.StringIO()
    plain = {"COLUMNS": WIDTH, "TERM": "dumb", "NO_COLOR": "1"}
    with mock.patch.dict(os.environ, plain), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        command.main(args=list(args), prog_name="dagflow", standalone_mode=False)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n") + "\n"


def commands() -> Iterator[list[str]]:
    """Every visible command's words after `dagflow`, the root first, groups before their commands."""
    import typer

    from dagflow.cli import app

    def walk(command: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            if not sub.hidden:
                yield from walk(sub, [*path, name])

    yield from walk(typer.main.get_command(app), [])


def cli_page() -> str:
    parts = [
        "# Command line reference",
        "",
        "Each command's `--help`, generated from the installed dagflow when the site is built.",
        "",
    ]
    for path in commands():
        title = " ".join(["dagflow", *path])
        parts += [f"## {title}", "", "```text", cli_output(*path, "--help").rstrip("\n"), "```", ""]
    return "\n".join(parts)


def _type(spec: dict[str, Any]) -> str:
    if "$ref" in spec:
        name = spec["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in spec:
        return " or ".join(_type(option) for option in spec["anyOf"] if option.get("type") != "null")
    if spec.get("type") == "array":
        return f"list of {_type(spec.get('items', {}))}"
    if "enum" in spec:
        return " \\| ".join(f"`{value}`" for value in spec["enum"])
    if "patternProperties" in spec:
        (value,) = spec["patternProperties"].values()
        return f"mapping of {_type(value)}"
    return str(spec.get("type", "any"))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(title: str, schema: dict[str, Any]) -> list[str]:
    rows = [f"## {title}", "", _cell(schema.get("description", "")), ""]
    rows += ["| key | type | meaning |", "| --- | --- | --- |"]
    required = set(schema.get("required", []))
    for key, spec in schema.get("properties", {}).items():
        shown = f"`{key}`" + (" (required)" if key in required else "")
        rows.append(f"| {shown} | {_cell(_type(spec))} | {_cell(spec.get('description', ''))} |")
    return [*rows, ""]


def schema_page() -> str:
    document = json.loads(cli_output("schema"))
    parts = [
        "# Pipeline schema",
        "",
        "The JSON Schema of pipeline files as `dagflow schema` prints it, generated when the site is built.",
        "The [pipeline guide](../pipeline.md) explains each field.",
        "",
        *_table("Pipeline", document),
    ]
    for name, definition in document.get("$defs", {}).items():
        parts += _table(name, definition)
    parts += ["## The JSON document", "", "```json", json.dumps(document, indent=2), "```", ""]
    return "\n".join(parts)


PAGES = {"reference/cli.md": cli_page, "reference/schema.md": schema_page}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files
