"""`dagflow run`, `dagflow status` and `dagflow logs`: the local engine from the command line."""

from __future__ import annotations

import json
import sys
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.app import app
from dagflow.cli.common import JsonOption, RunsDirOption, checked_run_id, fail, load_plan_or_exit
from dagflow.cli.submit_cmds import EngineName
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.ids import new_run_id, validate_run_id
from dagflow.run.journal import CACHED, read_journal
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, RunNotFoundError, find_run


class UsageError(DagflowError):
    pass


def _load_plan(pipeline: Path, run_id: str | None) -> Plan:
    if not pipeline.is_file():
        raise UsageError(f"{pipeline}: no such file")
    if pipeline.suffix != ".json":
        return load_plan_or_exit(pipeline, run_id)
    try:
        plan = Plan.from_json(pipeline.read_text())
    except (ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{pipeline}: not a dagflow plan ({error})") from None
    plan.run_id = run_id or new_run_id(plan.pipeline)
    return plan


def _runs_dir_hint(runs_dir: Path) -> str:
    return "" if runs_dir == DEFAULT_RUNS_DIR else f" --runs-dir {runs_dir}"


@app.command("run")
def run_command(
    pipeline: Annotated[
        Path | None, typer.Argument(help="pipeline.yaml to run (or a plan.json).", show_default=False)
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="RUN_ID", help="Rerun what did not finish in this run ('latest')."),
    ] = None,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", min=1, help="Nodes running at once [default: cpu count].")
    ] = None,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="GPU devices to use, e.g. 0,1 [default: nvidia-smi].")
    ] = None,
    force: Annotated[
        list[str] | None,
        typer.Option("--force", metavar="STEP", help="Run this step (or node) and its descendants even if cached."),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Run every node; skip nothing.")] = False,
    json_output: JsonOption = False,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Name the new run.", callback=checked_run_id)
    ] = None,
    kill_grace: Annotated[
        float, typer.Option("--kill-grace", min=0, help="Seconds between SIGTERM and SIGKILL.")
    ] = 10.0,
    engine: Annotated[EngineName, typer.Option("--engine", help="Where the nodes run.")] = EngineName.local,
) -> None:
    """Run a pipeline on this machine: nodes in parallel, retries, timeouts, caching, resume.

    Every run keeps its plan, logs and journal in RUNS_DIR/<run-id>/. A node unchanged since it last
    succeeded (command, environment, params, input files, upstream) is skipped; after a crash or
    Ctrl-C, `dagflow run --resume RUN_ID` reruns only what had not finished. Exit status: 0 all
    succeeded, 1 some node failed, 2 bad input, 130 interrupted.
    """
    if resume is not None and engine is EngineName.local:  # a run resumes on the engine that started it
        from dagflow.cli.submit_cmds import engine_of

        engine = engine_of(runs_dir, resume)
    if engine is not EngineName.local:
        local_only = {"--jobs": jobs, "--gpus": gpus, "--force": force, "--no-cache": no_cache}
        given = [option for option, value in local_only.items() if value]
        if given:
            fail(UsageError(f"{', '.join(given)}: only for the local engine ({engine.value} places and runs nodes)"))
    if engine is EngineName.slurm:  # sbatch jobs, waited for; see `dagflow submit` to return at once
        from dagflow.cli.submit_cmds import run_on_slurm

        raise typer.Exit(run_on_slurm(pipeline, resume, run_id, runs_dir, json_output))
    if engine is EngineName.condor:  # a DAGMan job, waited for; `dagflow submit` returns at once
        from dagflow.cli.condor_cmds import run_on_condor

        raise typer.Exit(run_on_condor(pipeline, resume, run_id, runs_dir, json_output))
    from dagflow.engines.local import JsonReporter, PlainReporter, Reporter, RunOptions, resume_local, run_local

    hint = _runs_dir_hint(runs_dir)
    reporter: Reporter
    if json_output:
        reporter = JsonReporter()
    elif sys.stdout.isatty():
        from dagflow.engines.local.live_view import RichReporter  # rich is only needed on a terminal

        reporter = RichReporter(runs_dir_hint=hint)
    else:
        reporter = PlainReporter(runs_dir_hint=hint)
    options = RunOptions(
        runs_dir=runs_dir,
        jobs=jobs,
        gpus=gpus,
        force=tuple(force or ()),
        use_cache=not no_cache,
        kill_grace_s=kill_grace,
        reporter=reporter,
        handle_signals=True,
    )
    try:
        if resume is not None:
            if pipeline is not None or run_id is not None:
                raise UsageError("--resume continues an existing run: give no pipeline and no --run-id")
            result = resume_local(resume, options)
        else:
            if pipeline is None:
                raise UsageError("give a pipeline file to run, or --resume RUN_ID")
            if run_id is not None:
                validate_run_id(run_id)
            if gpus is not None:
                from dagflow.engines.local.devices import check_devices

                check_devices(gpus)  # a device that is not here is bad input, not a slot to wait for
            result = run_local(_load_plan(pipeline, run_id), options)
    except DagflowError as error:
        fail(error)
    raise typer.Exit(result.exit_code)


@app.command("status")
def status_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    json_output: JsonOption = False,
    show_all: Annotated[bool, typer.Option("--all", help="List every node, also finished ones.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Refresh in place until the run ends (Ctrl-C stops).")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.2, help="Seconds between --watch refreshes.")] = 2.0,
) -> None:
    """Show a run's state: counts per node state and a table of nodes."""
    from dagflow.run.status import read_run_status  # dispatches on the run's engine (local, slurm, condor)
    from dagflow.run.status_view import print_status, watch_status

    try:
        status = read_run_status(find_run(runs_dir, run_id))
    except DagflowError as error:
        fail(error)
    if json_output:
        print(json.dumps(status.to_dict(), indent=None, separators=(",", ":")))
        return
    if watch:
        watch_status(lambda: read_run_status(status.layout), show_all, _runs_dir_hint(runs_dir), interval)
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


@app.command("logs")
def logs_command(
    run_id: Annotated[str, typer.Argument(help="Run id, or 'latest'.")],
    node: Annotated[str, typer.Argument(help="Node name, as `dagflow status` lists it.")],
    err: Annotated[bool, typer.Option("--err", help="Show stderr instead of stdout.")] = False,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
) -> None:
    """Print a node's stdout (or stderr, with --err) from a run."""
    try:
        layout = find_run(runs_dir, run_id)
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
            record = read_journal(layout.journal_path).nodes.get(node)
            if record is None or not record.attempts:
                raise RunNotFoundError(f"node {node} has not run in run {layout.run_id}")
            return  # it ran and printed nothing on this stream
    except DagflowError as error:
        fail(error)
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 16):
            sys.stdout.buffer.write(chunk)
    sys.stdout.flush()
