"""`dagflow resources suggest PIPELINE`: requests learned from what past runs of a pipeline used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dagflow.cli.common import JsonOption, fail
from dagflow.cli.root import app
from dagflow.errors import DagflowError
from dagflow.text import plural

resources_app = typer.Typer(
    help="Resource requests learned from history: what past runs of a pipeline used.", no_args_is_help=True
)
app.add_typer(resources_app, name="resources")

EXIT_NO_HISTORY = 1


@resources_app.command("suggest")
def suggest_command(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline YAML file.", show_default=False)],
    runs_dirs: Annotated[
        list[Path] | None,
        typer.Option(
            "--runs-dir",
            help="Where its runs live (repeatable) [default: .dagflow/runs here and beside the pipeline file].",
            file_okay=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Propose cpus, memory, gpus, gpu_memory and timeout per step from past runs (every engine's).

    Each value is the 95th percentile of what the step's node attempts used plus a margin (memory +20%,
    gpu_memory +10%, timeout x1.5), rounded up, and never below what failed for lack of it (an
    out-of-memory attempt at X MB: at least X x memory_growth; a timeout after T s: at least 2 T). The
    table shows the evidence: runs, samples, the percentile, the maximum and the failures. Exit code 1
    when there is no history to learn from.
    """
    from dagflow.engines.registry import spec_checks
    from dagflow.run.resources.history import default_runs_dirs, pipeline_history, skipped_warnings
    from dagflow.run.resources.suggest import PERCENTILE, suggest
    from dagflow.spec import load_spec

    try:
        spec = load_spec(pipeline, spec_checks())
    except DagflowError as error:
        fail(error)
    dirs = list(runs_dirs) if runs_dirs else default_runs_dirs(pipeline)
    history = pipeline_history(spec.model.name, dirs)
    skipped = skipped_warnings(history)
    for warning in skipped:
        print(f"warning: {warning}", file=typer.get_text_stream("stderr"))
    growth = {name: step.resources.memory_growth for name, step in spec.model.steps.items()}
    learned = {step: fields for step, fields in suggest(history, growth).items() if step in spec.model.steps}
    if not learned:
        where = ", ".join(str(path) for path in dirs)
        message = (
            f"no usage recorded for pipeline {spec.model.name!r} under {where}: run it first "
            f"(`dagflow run {pipeline}`), or point --runs-dir at where its runs live"
        )
        if as_json:
            print(json.dumps({"pipeline": spec.model.name, "runs": len(history), "percentile": PERCENTILE,
                              "steps": {}, "skipped": skipped, "message": message}))
        else:
            print(message, file=typer.get_text_stream("stderr"))
        raise typer.Exit(EXIT_NO_HISTORY)
    current = {name: _current(step) for name, step in spec.model.steps.items()}
    if as_json:
        print(json.dumps({**_as_json(spec.model.name, len(history), learned, current), "skipped": skipped}, indent=2))
        return
    _print_table(spec.model.name, len(history), learned, current)


def _current(step: Any) -> dict[str, Any]:
    res = step.resources
    return {"cpus": res.cpus, "memory": res.memory, "gpus": res.gpus, "gpu_memory": res.gpu_memory,
            "timeout": step.timeout}


def _as_json(pipeline: str, runs: int, learned: dict, current: dict) -> dict[str, Any]:
    from dagflow.run.resources.suggest import PERCENTILE

    steps: dict[str, Any] = {}
    for step, fields in learned.items():
        steps[step] = {
            name: {
                "current": current[step].get(name),
                "suggested": suggestion.value,
                "yaml": suggestion.as_yaml() if suggestion.value is not None else None,
                "unit": suggestion.unit,
                "why": suggestion.why,
                "evidence": {
                    "runs": suggestion.evidence.runs,
                    "samples": suggestion.evidence.samples,
                    "percentile": suggestion.evidence.percentile,
                    "max": suggestion.evidence.max,
                    "failures": suggestion.evidence.failures,
                    "floor": suggestion.evidence.floor,
                },
            }
            for name, suggestion in fields.items()
        }
    return {"pipeline": pipeline, "runs": runs, "percentile": PERCENTILE, "steps": steps}


def _number(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "":
        return f"{value:.2f}"
    return f"{value:.0f} {unit}"


def _print_table(pipeline: str, runs: int, learned: dict, current: dict) -> None:
    from rich.table import Table

    from dagflow.console import FittedTable, stdout_console
    from dagflow.run.resources.suggest import PERCENTILE

    table = Table(
        title=f"{pipeline}: requests learned from {plural(runs, 'past run')}",
        title_justify="left", caption_justify="left",
        box=None, padding=(0, 1), pad_edge=False, show_edge=False,  # ten columns: no room for borders at 80
    )
    for column in ("step", "field", "now", "suggested", "runs", "samples", f"p{PERCENTILE:g}", "max", "failures",
                   "why"):
        table.add_column(column, justify="right" if column in ("runs", "samples", "failures") else "left")
    for step, fields in learned.items():
        for name, suggestion in fields.items():
            now = current[step].get(name)
            evidence = suggestion.evidence
            unit = "%" if name == "gpus" else suggestion.unit
            table.add_row(
                step, name, "-" if now is None else str(now), suggestion.as_yaml(), str(evidence.runs),
                str(evidence.samples), _number(evidence.percentile, unit), _number(evidence.max, unit),
                str(evidence.failures), suggestion.why,
            )
    table.caption = (
        "memory/gpu_memory in MB (peak), cpus in cores busy (CPU time / wall time), gpus in % utilisation, "
        "timeout in s (wall time); now: the pipeline file's value (MB, s)"
    )
    stdout_console().print(FittedTable(table, keep=("step", "field"), fold=("why",)))
