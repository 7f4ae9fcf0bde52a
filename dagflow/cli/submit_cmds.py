"""`dagflow submit` and `dagflow cancel`: start a run on an engine without waiting for it, and stop it.

`--engine condor` (the default) submits the compiled DAG to a schedd as one DAGMan job; `--engine slurm`
hands the whole DAG to Slurm; `--engine local` starts a detached local runner. `dagflow cancel` stops a
run of any engine: it reads which one from the run directory.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.app import app
from dagflow.cli.common import JsonOption, RunsDirOption, checked_run_id, fail, load_plan_or_exit
from dagflow.errors import DagflowError
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, find_run

EXIT_CODES = {"succeeded": 0, "interrupted": 130}


class EngineName(StrEnum):
    condor = "condor"
    slurm = "slurm"
    local = "local"


class SubmitUsageError(DagflowError):
    pass


def print_run_status(layout: RunLayout, json_output: bool) -> int:
    """Print a run's status (a table, or one JSON line); the exit code its state means."""
    from dagflow.run.status import read_run_status
    from dagflow.run.status_view import print_status

    status = read_run_status(layout)
    if json_output:
        print(json.dumps(status.to_dict(), separators=(",", ":")))
    else:
        print_status(status, show_all=False)
    return EXIT_CODES.get(status.state, 1)


@app.command("submit")
def submit_command(
    pipeline: Annotated[Path | None, typer.Argument(help="pipeline.yaml to submit.", show_default=False)] = None,
    engine: Annotated[EngineName, typer.Option("--engine", help="Where the nodes run.")] = EngineName.condor,
    resume: Annotated[
        str | None,
        typer.Option("--resume", metavar="RUN_ID", help="Submit again what did not finish in this run ('latest')."),
    ] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the run to end; exit 0, 1 (failed) or 130.")] = False,
    run_id: Annotated[
        str | None, typer.Option("--run-id", help="Name the new run.", callback=checked_run_id)
    ] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    json_output: JsonOption = False,
    schedd: Annotated[
        str | None, typer.Option("--name", "--schedd", help="condor: schedd to submit to (default: the local one).")
    ] = None,
    pool: Annotated[str | None, typer.Option("--pool", help="condor: collector that knows the schedd.")] = None,
    max_gpu_jobs: Annotated[
        int, typer.Option(min=1, help="condor: GPU nodes DAGMan keeps submitted at once (MAXJOBS gpu N).")
    ] = 16,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="condor: print the DAGMan job's submit description; submit nothing.")
    ] = False,
) -> None:
    """Submit a pipeline to a batch engine and return once it holds the work.

    With --engine condor (the default) the pipeline is compiled into a new run directory and its DAG
    submitted to a schedd through the htcondor2 bindings (honouring CONDOR_CONFIG, --name and --pool);
    it prints the run id and the DAGMan job id. After a failure `dagflow resubmit RUN_ID` submits the
    rescue DAG. Exit status: 0 submitted, 2 bad input, 3 no schedd reachable (compiled files kept).

    With --engine slurm every node becomes an sbatch job (a job array per step where the wiring
    allows) with afterok/aftercorr dependencies, --gres=gpu:N for GPU steps and cpu, memory and time
    limits; the run directory records the job ids. Follow it with `dagflow status`, stop it with
    `dagflow cancel`, and after a failure `dagflow submit --resume RUN_ID` submits only what did not
    succeed. Exit status: 0 submitted, 2 bad input, 3 no Slurm reachable.
    """
    condor_only = {"--name": schedd, "--pool": pool, "--dry-run": dry_run, "--max-gpu-jobs": max_gpu_jobs != 16}
    if engine is EngineName.condor:
        if resume is not None or wait:
            fail(SubmitUsageError("--resume and --wait are for slurm and local; a condor run continues with "
                                  "`dagflow resubmit RUN_ID`"))
        if pipeline is None:
            fail(SubmitUsageError("give a pipeline file to submit"))
        from dagflow.cli.condor_cmds import submit_condor

        submit_condor(pipeline, schedd, pool, run_id, max_gpu_jobs, dry_run, runs_dir, json_output)
        return
    given = [option for option, value in condor_only.items() if value]
    if given:
        fail(SubmitUsageError(f"{', '.join(given)}: only for --engine condor"))
    try:
        if engine is EngineName.local:
            layout = _submit_local(pipeline, resume, run_id, runs_dir)
            summary: dict[str, object] = {"run_id": layout.run_id, "engine": "local"}
        else:
            submitted = _submit_slurm(pipeline, resume, run_id, runs_dir)
            layout = submitted.layout
            summary = {
                "run_id": layout.run_id,
                "engine": "slurm",
                "submission": submitted.sub,
                "nodes": submitted.nodes,
                "jobs": submitted.jobs,
                "seconds": round(submitted.seconds, 3),
            }
        if wait:
            _wait(layout)
    except DagflowError as error:
        fail(error)
    if wait:
        raise typer.Exit(print_run_status(layout, json_output))
    if json_output:
        print(json.dumps(summary, separators=(",", ":")))
    elif engine is EngineName.slurm:
        jobs = summary["jobs"]
        print(
            f"submitted run {layout.run_id}: {summary['nodes']} nodes as {len(jobs)} Slurm jobs "  # type: ignore[arg-type]
            f"in {summary['seconds']} s; follow it with `dagflow status {layout.run_id}`"
        )
    else:
        print(f"started run {layout.run_id} in the background; follow it with `dagflow status {layout.run_id}`")


def engine_of(runs_dir: Path, run_id: str) -> EngineName:
    """The engine an existing run was started with (a resume continues on it); local if unknown."""
    from dagflow.engines.condor.records import is_condor_run
    from dagflow.engines.slurm import is_slurm_run

    try:
        layout = find_run(runs_dir, run_id)
    except DagflowError:  # no such run: the local engine's resume says so
        return EngineName.local
    if is_condor_run(layout.run_dir):
        return EngineName.condor
    return EngineName.slurm if is_slurm_run(layout) else EngineName.local


def _submit_slurm(pipeline: Path | None, resume: str | None, run_id: str | None, runs_dir: Path):  # -> Submitted
    from dagflow.engines.slurm import resume_slurm, submit_slurm

    if resume is not None:
        if pipeline is not None or run_id is not None:
            raise SubmitUsageError("--resume continues an existing run: give no pipeline and no --run-id")
        return resume_slurm(resume, runs_dir)
    if pipeline is None:
        raise SubmitUsageError("give a pipeline file to submit, or --resume RUN_ID")
    return submit_slurm(load_plan_or_exit(pipeline, run_id), runs_dir)


def run_on_slurm(
    pipeline: Path | None,
    resume: str | None,
    run_id: str | None,
    runs_dir: Path,
    json_output: bool,
) -> int:
    """`dagflow run --engine slurm`: submit, wait for the end, print the status; the exit code."""
    try:
        layout = _submit_slurm(pipeline, resume, run_id, runs_dir).layout
        _wait(layout)
    except DagflowError as error:
        fail(error)
    return print_run_status(layout, json_output)


def _submit_local(pipeline: Path | None, resume: str | None, run_id: str | None, runs_dir: Path) -> RunLayout:
    from dagflow.engines.local import LocalEngine, RunOptions

    engine = LocalEngine(RunOptions(runs_dir=runs_dir))
    if resume is not None:
        layout = find_run(runs_dir, resume)
        engine.submit(layout.load_plan(), layout.run_dir)
        return layout
    if pipeline is None:
        raise SubmitUsageError("give a pipeline file to submit, or --resume RUN_ID")
    plan = load_plan_or_exit(pipeline, run_id)
    layout = RunLayout(runs_dir.absolute(), plan.run_id)
    engine.submit(plan, layout.run_dir)
    return layout


def _wait(layout: RunLayout) -> None:
    from dagflow.engines.slurm import is_slurm_run, wait_slurm

    if is_slurm_run(layout):
        wait_slurm(layout)
        return
    import time

    from dagflow.run.status import read_status

    time.sleep(0.5)  # the detached runner takes the run's lock as it starts
    while read_status(layout).runner_alive:
        time.sleep(0.5)


@app.command("cancel")
def cancel_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    json_output: JsonOption = False,
) -> None:
    """Stop a submitted run: remove its DAGMan job, scancel its Slurm jobs, or stop its local runner.

    Finished nodes stay finished: continue with `dagflow resubmit` (condor) or `--resume` (slurm, local).
    """
    from dagflow.engines.condor.records import is_condor_run
    from dagflow.engines.local import LocalEngine
    from dagflow.engines.slurm import cancel_slurm, is_slurm_run

    try:
        layout = find_run(runs_dir, run_id)
        if is_condor_run(layout.run_dir):
            from dagflow.cli.condor_cmds import cancel_condor_run

            cancel_condor_run(layout, json_output)
            return
        if is_slurm_run(layout):
            cancel_slurm(layout.run_id, layout.runs_dir)
        else:
            LocalEngine().cancel(layout.run_dir)
            _wait(layout)  # the runner stops its nodes and journals them
    except DagflowError as error:
        fail(error)
    print_run_status(layout, json_output)
