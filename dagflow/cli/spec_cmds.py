"""Commands that read a pipeline file without running it: validate, schema, plan."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import (
    OnlyOption,
    SetOption,
    checked_run_id,
    fail,
    load_plan_or_exit,
    note_json,
)
from dagflow.cli.engine_flags import checked_engine
from dagflow.cli.root import app
from dagflow.engines.registry import spec_checks
from dagflow.errors import DagflowError


class UsageError(DagflowError):
    pass


PipelineArg = Annotated[Path, typer.Argument(help="The pipeline YAML file.", show_default=False)]


@app.command()
def validate(
    pipeline: PipelineArg,
    engine: Annotated[
        str | None,
        typer.Option("--engine", help="Also warn about each step field this engine ignores.", callback=checked_engine),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Also print what each step's cache key tracks, and what no cache key sees."),
    ] = False,
) -> None:
    """Check a pipeline file and report every problem at once.

    Each problem is printed as FILE:LINE:COLUMN: FIELD: what is wrong (what is allowed); hint.
    Warnings (a deprecated key; with --engine, step fields that engine will not place by) are printed
    as `warning: ...` on stderr and leave the exit code alone. Exit code 0 when the file is valid, 2 when
    it is not.
    """
    from dagflow.cli.validate_file import validate_file

    code = validate_file(pipeline, engine, explain)
    if code:
        raise typer.Exit(code)


@app.command()
def schema() -> None:
    """Print the JSON Schema of pipeline files.

    Point your editor at it for completion and checking, e.g. for VS Code's YAML extension:
    `dagflow schema > dagflow.schema.json` and add `# yaml-language-server: $schema=dagflow.schema.json`
    at the top of pipeline.yaml.
    """
    document = spec_checks().pipeline_model().model_json_schema(by_alias=True)  # with the engines' sections
    document["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    document["title"] = "dagflow pipeline"
    print(json.dumps(document, indent=2))


@app.command()
def plan(
    pipeline: PipelineArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole plan as JSON.", callback=note_json)] = False,
    as_dot: Annotated[bool, typer.Option("--dot", help="Print the DAG in Graphviz DOT (pipe to `dot -Tsvg`).")] = False,
    limit: Annotated[int, typer.Option(help="Rows to show in the table; 0 shows all.")] = 200,
    run_id: Annotated[
        str | None, typer.Option(help="Run id to render {run.id} with.", callback=checked_run_id)
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option("--png", help="Draw the DAG as a PNG here (grouped by step and matrix value when big).",
                     dir_okay=False),
    ] = None,
    only: OnlyOption = None,
    sets: SetOption = None,
) -> None:
    """Show the expanded DAG: every node with its matrix coordinates, resources and parents.

    With --only and --set, the DAG that `dagflow run` with the same options would run.
    """
    from dagflow.plan import render

    if as_json and as_dot:
        fail(UsageError("choose one of --json and --dot"))
    expanded = load_plan_or_exit(pipeline, run_id, only=only, sets=sets)
    if png is not None:
        from dagflow.report.png import dag_png

        try:
            dag_png(expanded, png)
        except OSError as error:
            fail(UsageError(f"--png {png}: cannot write it ({error.strerror or error})"))
        if not (as_json or as_dot):
            print(png)
            return
    if as_json:
        print(render.to_json(expanded))
    elif as_dot:
        sys.stdout.writelines(line + "\n" for line in render.to_dot(expanded))
    else:
        from rich.console import Console

        Console().print(render.table(expanded, limit=limit or None))
        for name, step in expanded.steps.items():  # where `auto` resources came from (dagflow/run/resources/auto.py)
            for field, note in step.resource_notes.items():
                print(f"{name}.{field}: {note}")
