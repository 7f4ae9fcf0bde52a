"""`dagflow submit`, `dagflow resubmit` and `dagflow cancel`: start a run on an engine without waiting for
it, continue it, and stop it. Engines come from the registry (dagflow/engines/registry.py); a run that
exists is always continued and stopped by the engine recorded in its run directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from dagflow.cli.common import (
    NO_PARAMS_SOURCE,
    JsonOption,
    OnlyOption,
    ParamsFromSearchOption,
    ParamsSource,
    PipelineRunsDirOption,
    SearchDbOption,
    SetOption,
    checked_run_id,
    fail,
    find_run_from,
    runs_dir_of,
)
from dagflow.cli.engine_flags import (
    EngineUsageError,
    check_engine_settings,
    engine_option,
    load_plan_for,
    print_report,
    with_engine_options,
)
from dagflow.cli.root import app
from dagflow.errors import CannotWriteError, DagflowError
from dagflow.run.layout import RunLayout

EXIT_CODES = {"succeeded": 0, "interrupted": 130}
SUBMIT_DEFAULT_ENGINE = "condor"


def print_run_status(layout: RunLayout, json_output: bool) -> int:
    """Print a run's status (a table, or one JSON line); the exit code its state means."""
    from dagflow.engines.registry import read_run_status
    from dagflow.run.status_view import print_status

    status = read_run_status(layout)
    if json_output:
        print(json.dumps(status.to_dict(), separators=(",", ":")))
    else:
        print_status(status, show_all=False)
    return EXIT_CODES.get(status.state, 1)


def continued_engine(layout: RunLayout, asked: str | None) -> str:
    """The engine that continues an existing run: the one recorded for it; asking for another is an error."""
    from dagflow.engines.registry import engine_of_run

    recorded = engine_of_run(layout)
    if asked is not None and asked != recorded:
        raise EngineUsageError(
            f"run {layout.run_id} was started with --engine {recorded}; it continues there "
            "(leave out --engine)"
        )
    return recorded


def check_resume_arguments(
    pipeline: Path | None,
    run_id: str | None,
    only: list[str] | None = None,
    sets: list[str] | None = None,
    params_source: ParamsSource = NO_PARAMS_SOURCE,
) -> None:
    if pipeline is not None or run_id is not None or only or sets or params_source.search or params_source.db:
        raise EngineUsageError(
            "--resume continues an existing run as it was planned: give no pipeline, --run-id, --only, --set, "
            "--params-from-search or --search-db"
        )


@app.command("submit")
@with_engine_options("submit")
def submit_command(
    pipeline: Annotated[Path | None, typer.Argument(help="pipeline.yaml to submit.", show_default=False)] = None,
    engine: Annotated[str | None, engine_option(SUBMIT_DEFAULT_ENGINE)] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="RUN_ID", help="Submit again what did not finish in this run ('latest')."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to end; exit 0, 1 (failed) or 130.")] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Name the new run.", callback=checked_run_id)
    ] = None,
    runs_dir: PipelineRunsDirOption = None,
    json_output: JsonOption = False,
    only: OnlyOption = None,
    sets: SetOption = None,
    params_from_search: ParamsFromSearchOption = None,
    search_db: SearchDbOption = None,
    engine_settings: dict[str, Any] | None = None,
) -> None:
    """Submit a pipeline to an engine and return once it holds the work.

    With --engine condor (the default) the pipeline is compiled into a new run directory and its DAG
    submitted to a schedd through the htcondor2 bindings (honouring CONDOR_CONFIG, --name and --pool);
    it prints the run id and the DAGMan job id. With --engine slurm every node becomes an sbatch job (a
    job array per step where the wiring allows) with afterok/aftercorr dependencies. With --engine local
    a detached runner runs the nodes on this machine.

    Follow a run with `dagflow status`, stop it with `dagflow cancel`; after a failure `dagflow resubmit
    RUN_ID` (or `submit --resume RUN_ID`) submits only what did not succeed, on the engine that started
    the run. Exit status: 0 submitted, 2 bad input, 3 engine not reachable (compiled files kept).
    """
    from dagflow.engines.registry import load_engine, run_session

    given = engine_settings or {}
    searched = ParamsSource(params_from_search, search_db)
    try:
        if resume is not None:
            check_resume_arguments(pipeline, run_id, only, sets, searched)
            layout = find_run_from(runs_dir, resume)
            name = continued_engine(layout, engine)
            check_engine_settings(name, given, "submit")
            session = run_session(load_engine(name, layout.runs_dir, given))
            work = session.proceed(layout, dry_run=bool(given.get("dry_run")))
        else:
            if pipeline is None:
                raise EngineUsageError("give a pipeline file to submit, or --resume RUN_ID")
            name = engine or SUBMIT_DEFAULT_ENGINE
            check_engine_settings(name, given, "submit")
            plan = load_plan_for(pipeline, run_id, name, only, sets, given, searched)
            chosen_dir = runs_dir_of(pipeline, runs_dir)
            session = run_session(load_engine(name, chosen_dir, given))
            layout, work = session.start(plan, chosen_dir, dry_run=bool(given.get("dry_run")))
        if wait:
            session.launch(layout, work)
            session.engine.wait(layout.run_dir)
            raise typer.Exit(print_run_status(layout, json_output))
        report = session.submit(layout, work)
    except DagflowError as error:
        fail(error)
    except OSError as error:
        fail(CannotWriteError(error, runs_dir))
    print_report(report, json_output)


@app.command("resubmit")
@with_engine_options("resubmit")
def resubmit_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: PipelineRunsDirOption = None,
    json_output: JsonOption = False,
    engine_settings: dict[str, Any] | None = None,
) -> None:
    """Submit a failed or cancelled run again, on the engine that started it; what finished is not rerun.

    A condor run is submitted from DAGMan's newest rescue DAG (condor_submit_dag -DoRescueFrom N); a
    condor run whose first submission found no schedd is submitted as compiled. A slurm run submits the
    nodes that did not succeed; a local run starts a detached runner on the rest.
    Exit status: 0 submitted, 2 nothing to resubmit (running, succeeded, no rescue DAG) or a live run runs
    its nodes, 3 not reachable.
    """
    from dagflow.engines.registry import load_engine, run_session

    given = engine_settings or {}
    try:
        layout = find_run_from(runs_dir, run_id)
        name = continued_engine(layout, None)
        check_engine_settings(name, given, "resubmit")
        session = run_session(load_engine(name, layout.runs_dir, given))
        report = session.submit(layout, session.proceed(layout, dry_run=bool(given.get("dry_run"))))
    except DagflowError as error:
        fail(error)
    print_report(report, json_output)


@app.command("cancel")
def cancel_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: PipelineRunsDirOption = None,
    json_output: JsonOption = False,
) -> None:
    """Stop a submitted run with the engine that started it: remove its DAGMan job, scancel its Slurm
    jobs, or stop its local runner.

    Finished nodes stay finished: continue with `dagflow resubmit` (or `--resume`).
    """
    from dagflow.engines.registry import engine_for_run, run_session

    try:
        layout = find_run_from(runs_dir, run_id)
        report = run_session(engine_for_run(layout)).cancel(layout)
    except DagflowError as error:
        fail(error)
    if report is not None:
        print_report(report, json_output)
        return
    print_run_status(layout, json_output)
