"""`dagflow run`, `dagflow status` and `dagflow logs`: run a pipeline (on this machine by default) and look
at a run of any engine."""

from __future__ import annotations

import sys
from difflib import get_close_matches
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dagflow.cli.common import (
    JsonOption,
    OnlyOption,
    ParamsFromSearchOption,
    ParamsSource,
    PipelineRunsDirOption,
    SearchDbOption,
    SetOption,
    as_typed,
    checked_run_id,
    fail,
    find_run_from,
    runs_dir_of,
)
from dagflow.cli.engine_flags import check_engine_settings, engine_option, load_plan_for, with_engine_options
from dagflow.cli.root import app
from dagflow.errors import DagflowError
from dagflow.run.layout import RunLayout, RunNotFoundError

if TYPE_CHECKING:
    from dagflow.plan import Plan

RUN_DEFAULT_ENGINE = "local"


class UsageError(DagflowError):
    pass


def _load_plan(
    pipeline: Path,
    run_id: str | None,
    engine: str,
    only: list[str],
    sets: list[str],
    settings: dict[str, Any],
    searched: ParamsSource,
) -> Plan:
    from dagflow.plan import Plan
    from dagflow.run.ids import new_run_id

    if not pipeline.is_file():
        raise UsageError(f"{pipeline}: no such file")
    if pipeline.suffix != ".json":
        return load_plan_for(pipeline, run_id, engine, only, sets, settings, searched)
    if only or sets or searched.search:
        raise UsageError(
            f"{pipeline}: a plan file is run as it was planned; --only, --set and --params-from-search need a "
            "pipeline file"
        )
    try:
        plan = Plan.from_json(pipeline.read_text())
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{pipeline}: not a dagflow plan ({error})") from None
    plan.run_id = run_id or new_run_id(plan.pipeline)
    return plan


def _runs_dir_hint(runs_dir: Path | None) -> str:
    return "" if runs_dir is None else f" --runs-dir {runs_dir}"


@app.command("run")
@with_engine_options("run")
def run_command(
    pipeline: Annotated[
        Path | None, typer.Argument(help="pipeline.yaml to run (or a plan.json).", show_default=False)
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="RUN_ID", help="Rerun what did not finish in this run ('latest')."),
    ] = None,
    json_output: JsonOption = False,
    runs_dir: PipelineRunsDirOption = None,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Name the new run.", callback=checked_run_id)
    ] = None,
    engine: Annotated[str | None, engine_option(RUN_DEFAULT_ENGINE)] = None,
    only: OnlyOption = None,
    sets: SetOption = None,
    params_from_search: ParamsFromSearchOption = None,
    search_db: SearchDbOption = None,
    engine_settings: dict[str, Any] | None = None,
) -> None:
    """Run a pipeline and wait for it: on this machine by default (nodes in parallel, retries, timeouts,
    caching, resume), or on a batch engine with --engine.

    Part of it, or other params: `dagflow run pipeline.yaml --only region=us --set alpha=0.5` runs the us
    nodes with alpha 0.5; running the same command again finds them cached. `--params-from-search NAME`
    runs each region with the best params search NAME found for it.

    Every run keeps its plan, logs and journal in RUNS_DIR/<run-id>/ (.dagflow/runs beside the pipeline file,
    wherever the command is typed; status and logs find it from there and from here). A node unchanged since it last
    succeeded (command, environment, params, input files, upstream) is skipped; after a crash or
    Ctrl-C, `dagflow run --resume RUN_ID` reruns only what had not finished, on the engine that started
    the run. Exit status: 0 all succeeded, 1 some node failed, 2 bad input, 130 interrupted.
    """
    from dagflow.cli.submit_cmds import check_resume_arguments, continued_engine, print_run_status
    from dagflow.engines.registry import load_engine, run_session

    given = engine_settings or {}
    searched = ParamsSource(params_from_search, search_db)
    try:
        if resume is not None:
            check_resume_arguments(pipeline, run_id, only, sets, searched)
            layout = find_run_from(runs_dir, resume)
            name = continued_engine(layout, engine)
            check_engine_settings(name, given, "run")
            session = run_session(load_engine(name, as_typed(layout.runs_dir), given))
            work = session.proceed(layout)
        else:
            if pipeline is None:
                raise UsageError("give a pipeline file to run, or --resume RUN_ID")
            name = engine or RUN_DEFAULT_ENGINE
            check_engine_settings(name, given, "run")
            plan = _load_plan(pipeline, run_id, name, only or [], sets or [], given, searched)
            chosen_dir = runs_dir_of(pipeline, runs_dir)
            session = run_session(load_engine(name, chosen_dir, given))
            layout, work = session.start(plan, chosen_dir)
        code = session.run(layout, work, json_output)
        if code is None:  # waited for with --json: show where the run ended
            code = print_run_status(layout, json_output)
    except DagflowError as error:
        fail(error)
    raise typer.Exit(code)


@app.command("status")
def status_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: PipelineRunsDirOption = None,
    json_output: JsonOption = False,
    show_all: Annotated[bool, typer.Option("--all", help="List every node, also finished ones.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh in place until the run ends (Ctrl-C stops).")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between --watch refreshes.")] = 2.0,
) -> None:
    """Show a run's state: counts per node state and a table of nodes."""
    from dagflow.engines.registry import read_run_status  # read the way the run's recorded engine says
    from dagflow.run.status_view import print_status, watch_status

    try:
        status = read_run_status(find_run_from(runs_dir, run_id), ingest=True)
    except DagflowError as error:
        fail(error)
    if json_output:  # written a piece at a time: a big run's JSON is tens of MB
        sys.stdout.flush()
        status.write_json(sys.stdout.buffer)
        sys.stdout.buffer.write(b"\n")
        sys.stdout.flush()
        return
    if watch:
        watch_status(lambda: read_run_status(status.layout, ingest=True), show_all, _runs_dir_hint(runs_dir), interval)
        return
    print_status(status, show_all, _runs_dir_hint(runs_dir))


def _cached_from(layout: RunLayout, node: str, key: str) -> RunLayout:
    """The run whose output a cached node reuses (said on stderr), or an error saying it is gone."""
    from dagflow.run.provenance import producing_run

    producer = producing_run(layout, node, key)
    if producer is None:
        raise RunNotFoundError(
            f"node {node} was cached in run {layout.run_id} (unchanged since an earlier run), and no run "
            f"under {layout.runs_dir} that ran it is left"
        )
    print(f"# {node} was cached in run {layout.run_id}: output of run {producer.run_id}", file=sys.stderr)
    return producer


def _say_why_no_output(layout: RunLayout, node: str) -> None:
    """A node with no output file on this stream: nothing when its attempt ended (it printed nothing), a line
    on stderr while its engine runs it (a batch job's output comes back when it ends), else RunNotFoundError.
    The engine's status decides, not the journal: an ingest journals a running job's start, so attempts alone
    do not say it ended."""
    from dagflow.engines.registry import read_run_status

    status = read_run_status(layout)
    record = status.journal.nodes.get(node)
    if record is None or record.state not in ("queued", "held", "running", "retrying"):
        if record is not None and record.attempts:
            return  # it ran and printed nothing on this stream
        raise RunNotFoundError(f"node {node} has not run in run {layout.run_id}")
    line = f"{node} is {record.state}: no output yet"
    arrives = status.extra.get("output_arrives")
    if record.state == "running" and arrives:
        line = f"{node} is running; {arrives}"
    print(line, file=sys.stderr)


@app.command("logs")
def logs_command(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")],
    node: Annotated[str, typer.Argument(help="Node name, as `dagflow status` lists it.")],
    err: Annotated[bool, typer.Option("--err", help="Show stderr instead of stdout.")] = False,
    runs_dir: PipelineRunsDirOption = None,
) -> None:
    """Print a node's stdout (or stderr, with --err) from a run."""
    from dagflow.run.journal import CACHED, read_journal

    try:
        layout = find_run_from(runs_dir, run_id)
        plan = layout.load_plan()
        if node not in plan.nodes:
            close = get_close_matches(node, list(plan.nodes), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise RunNotFoundError(f"run {layout.run_id} has no node {node!r}{hint}")
        record = read_journal(layout.journal_path).nodes.get(node)
        if record is not None and record.state == CACHED and record.key:
            layout = _cached_from(layout, node, record.key)
        path = layout.stderr_path(node) if err else layout.stdout_path(node)
        if not path.is_file():
            _say_why_no_output(layout, node)
            return
    except DagflowError as error:
        fail(error)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 16):
            sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
