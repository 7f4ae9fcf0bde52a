"""`dagflow report`: a run (of any engine) or a search as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import PipelineRunsDirOption, fail, find_run_from
from dagflow.cli.root import app
from dagflow.errors import DagflowError
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, RunNotFoundError

REPORT_FILE = "report.html"
SEARCH_DB = "search.db"  # beside the runs directory, as dagflow search's default .dagflow/search.db


class ReportUsageError(DagflowError):
    pass


def resolve_run(run: str | None, runs_dir: Path | None) -> RunLayout:
    """A run named by id (or 'latest'), found as status finds it, or by its directory (a path holding
    plan.json)."""
    if run is not None and ("/" in run or run in (".", "..")):
        layout = RunLayout.from_run_dir(Path(run))
        if not layout.exists():
            raise RunNotFoundError(f"{run}: not a run directory (no plan.json in it)")
        return layout
    return find_run_from(runs_dir, run)


@app.command("report")
def report_command(
    run: Annotated[
        str | None,
        typer.Argument(help="Run id, 'latest', or a run directory [default: the latest run].", show_default=False),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="The HTML file to write [default: RUN_DIR/report.html].", dir_okay=False),
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="Also write the DAG, coloured by node state, as a PNG.", dir_okay=False)
    ] = None,
    search: Annotated[
        str | None,
        typer.Option("--search", help="Report this search (trials, convergence) instead of one run.", metavar="NAME"),
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option("--db", help="The search database [default: search.db beside the runs dir].", dir_okay=False),
    ] = None,
    runs_dir: PipelineRunsDirOption = None,
) -> None:
    """Write one self-contained HTML page about a run: the DAG with node states, a timeline per machine
    slot, resources used against requested per step (waste called out), metrics and promotion verdicts
    per region, and for a search's trial run the search's convergence plot and trials. It needs no
    network to view. Works for runs of every engine."""
    from dagflow.files import write_atomic
    from dagflow.report.collect import collect_run, search_summary
    from dagflow.report.html import render_run
    from dagflow.report.search_html import render_search

    try:
        if search is not None:
            if run is not None or png is not None:
                raise ReportUsageError("--search reports a whole search: give no RUN and no --png with it")
            database = db or Path(runs_dir or DEFAULT_RUNS_DIR).absolute().parent / SEARCH_DB
            summary = search_summary(database, search)
            if summary is None:
                raise ReportUsageError(f"no search {search!r} in {database} (give --db)")
            text = render_search(summary)
            target = out or database.parent / "searches" / f"{search}-report.html"
        else:
            layout = resolve_run(run, runs_dir)
            database = db or layout.runs_dir.parent / SEARCH_DB
            report = collect_run(layout, database)
            text = render_run(report)
            target = out or layout.run_dir / REPORT_FILE
            if png is not None:
                from dagflow.report.png import dag_png

                dag_png(report.plan, png, report.states)
        write_atomic(target, text.encode("utf-8"))
    except DagflowError as error:
        fail(error)
    except OSError as error:
        fail(ReportUsageError(f"cannot write the report: {error}"))
    print(target)
    if png is not None:
        print(png)
