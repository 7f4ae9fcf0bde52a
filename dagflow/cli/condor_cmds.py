"""HTCondor commands: compile a pipeline to DAGMan input, lint generated DAG files, and run a pipeline on a
pool (`dagflow submit --engine condor`, `dagflow cancel`, `dagflow resubmit`; `dagflow status` reads them)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.app import app
from dagflow.cli.common import JsonOption, RunsDirOption, checked_run_id, fail, load_plan_or_exit
from dagflow.errors import EXIT_USAGE, DagflowError
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, find_run


@app.command("compile")
def compile_command(
    pipeline: Annotated[Path, typer.Argument(help="The pipeline YAML file.", show_default=False)],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            help="Directory to write into (created). Default: .dagflow/runs/<run-id>/condor",
            show_default=False,
        ),
    ] = None,
    run_id: Annotated[
        str | None,
        typer.Option(help="Run id (rendered into {run.id}); default: a new one.", callback=checked_run_id),
    ] = None,
    max_gpu_jobs: Annotated[
        int, typer.Option(min=1, help="How many GPU nodes DAGMan keeps submitted at once (MAXJOBS gpu N).")
    ] = 16,
) -> None:
    """Compile a pipeline into HTCondor DAGMan input, ready for condor_submit_dag.

    Writes <pipeline>.dag (JOB, VARS, RETRY, PRIORITY, CATEGORY, PARENT lines for every node),

    one <step>.sub per step (filled from submit/<kind>.sub), and logs/ for each node's stdout/stderr.

    Jobs run `/usr/bin/env <argv>` in the pipeline's directory, on a shared filesystem.

    GPU steps require HAS_GPU, GPU memory and CUDA capability, and share the throttled `gpu` category.

    Nothing is submitted: run `condor_submit_dag DIR/<pipeline>.dag`; check first with `dagflow lint DIR`.

    Exit code 2 on an invalid pipeline or on a value that cannot be written safely.
    """
    from dagflow.engines.condor.compile import compile_plan

    plan = load_plan_or_exit(pipeline, run_id)
    out_dir = output if output is not None else Path(".dagflow") / "runs" / plan.run_id / "condor"
    try:
        from dagflow.engines.condor.dag_writer import DagOptions
        dag = compile_plan(plan, out_dir, options=DagOptions(max_gpu_jobs=max_gpu_jobs))
    except DagflowError as error:
        fail(error)
    print(f"wrote {dag} ({len(plan.nodes)} nodes, {len(plan.steps)} submit files)")
    print(f"submit with: condor_submit_dag {dag}")


@app.command("lint")
def lint_command(
    target: Annotated[
        Path, typer.Argument(help="A .dag file, or a directory whose *.dag files to check.", show_default=False)
    ],
    dag_checker: Annotated[
        str | None,
        typer.Option(
            "--dag-checker",
            envvar="DAGFLOW_DAG_CHECKER",
            help="HTCondor's condor_dag_checker to use. Default: the one on PATH.",
            show_default=False,
        ),
    ] = None,
    builtin: Annotated[
        bool, typer.Option("--no-dag-checker", help="Use dagflow's own parser even where HTCondor is installed.")
    ] = False,
) -> None:
    """Check DAGMan input files before you submit them (DAGMan itself only checks at submit time).

    With HTCondor installed, condor_dag_checker checks DAGMan syntax, node names, cycles and SUBDAG files.

    Without it, dagflow's own parser checks the same, following DAGMan's syntax.

    Either way dagflow checks that JOB submit files exist and parse (NOOP nodes need none).

    It warns of MAXJOBS categories that no CATEGORY line uses.

    In files dagflow compiled, VARS values must be double-quoted, with only \\\\ and \\" escapes, no live `$`.

    Each problem is printed as FILE:LINE: severity: message. Exit code 0 when clean, 2 on any error.
    """
    from dagflow.engines.condor.lint import dag_files, find_checker, lint_dag

    if not target.exists():
        print(f"error: {target} does not exist", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    checker = None if builtin else find_checker(dag_checker)
    if checker is not None and not checker.is_file():
        print(f"error: condor_dag_checker {checker} does not exist", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    files = dag_files(target)
    if not files:
        print(f"error: no .dag file in {target}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    checked_by = f"{checker} and dagflow" if checker else "dagflow's parser (no condor_dag_checker)"
    errors = 0
    for path in files:
        problems = lint_dag(path, checker)
        for problem in problems:
            print(problem.render(), file=sys.stderr)
        count = sum(1 for problem in problems if problem.severity == "error")
        errors += count
        if not count:
            print(f"{path}: ok (checked by {checked_by})")
    if errors:
        print(f"{errors} error{'s' if errors != 1 else ''} found (checked by {checked_by})", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)


DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the DAGMan job's submit description; submit nothing.")
]


def _submitted(submission, target_text: str, json_output: bool) -> None:  # submission: engine.Submission
    layout = submission.prepared.layout
    dag = submission.prepared.dag
    if json_output:
        summary = {
            "run_id": layout.run_id,
            "engine": "condor",
            "dagman_job": None if submission.cluster is None else f"{submission.cluster}.0",
            "schedd": submission.prepared.record.schedd,
            "pool": submission.prepared.record.pool,
            "dag": str(dag),
            "rescue": submission.rescue,
            "dry_run": submission.cluster is None,
        }
        if submission.cluster is None:
            summary["description"] = submission.description
        print(json.dumps(summary, separators=(",", ":")))
        return
    rescue = f" from rescue DAG {submission.rescue:03d}" if submission.rescue is not None else ""
    if submission.cluster is None:
        print(f"# dry run: would submit {dag}{rescue} to {target_text}; nothing submitted", file=sys.stderr)
        print(f"# run {layout.run_id}: compiled files in {dag.parent}", file=sys.stderr)
        sys.stdout.write(submission.description)
        return
    print(f"submitted run {layout.run_id}{rescue}: DAGMan job {submission.cluster}.0 on {target_text}")
    print(f"follow it with `dagflow status {layout.run_id}`; stop it with `dagflow cancel {layout.run_id}`")


def submit_condor(
    pipeline: Path,
    name: str | None,
    pool: str | None,
    run_id: str | None,
    max_gpu_jobs: int,
    dry_run: bool,
    runs_dir: Path,
    json_output: bool,
) -> None:
    """`dagflow submit --engine condor`: compile into a new run directory and submit the DAG to a schedd.

    Uses the htcondor2 bindings (Submit.from_dag, Schedd.submit) and the HTCondor configuration in
    force (CONDOR_CONFIG). With no reachable schedd: one line, exit 3, compiled files kept.
    """
    from dagflow.engines.condor.engine import prepare_condor, submit_prepared
    from dagflow.engines.condor.schedd import CondorUnreachableError, ScheddTarget

    plan = load_plan_or_exit(pipeline, run_id)
    target = ScheddTarget(name, pool)
    try:
        from dagflow.engines.condor.dag_writer import DagOptions
        prepared = prepare_condor(plan, runs_dir, target, DagOptions(max_gpu_jobs=max_gpu_jobs))
    except DagflowError as error:
        fail(error)
    try:
        submission = submit_prepared(prepared, dry_run=dry_run)
    except CondorUnreachableError as error:
        fail(
            CondorUnreachableError(
                f"{error}; compiled files kept in {prepared.dag.parent} "
                f"(submit them later with `dagflow resubmit {plan.run_id}`)"
            )
        )
    except DagflowError as error:
        fail(error)
    _submitted(submission, target.describe(), json_output)


def cancel_condor_run(layout: RunLayout, json_output: bool) -> None:
    """`dagflow cancel` of a condor run: remove its DAGMan job; DAGMan removes the nodes, writes a rescue DAG."""
    from dagflow.engines.condor.engine import cancel_condor

    try:
        cluster = cancel_condor(layout)
    except DagflowError as error:
        fail(error)
    if json_output:
        print(json.dumps({"run_id": layout.run_id, "engine": "condor", "removed": f"{cluster}.0"}))
    else:
        print(
            f"removed DAGMan job {cluster}.0 of run {layout.run_id}; continue with `dagflow resubmit {layout.run_id}`"
        )


@app.command("resubmit")
def resubmit_command(
    run_id: Annotated[str | None, typer.Argument(help="Run id [default: the latest run].")] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    dry_run: DryRunOption = False,
    json_output: JsonOption = False,
) -> None:
    """Submit a failed or cancelled condor run again from DAGMan's newest rescue DAG.

    Nodes that finished are not rerun (condor_submit_dag -DoRescueFrom N with the newest
    <dag>.rescueNNN). A run whose first submission found no schedd is submitted as compiled.
    Exit status: 0 submitted, 2 nothing to resubmit (running, succeeded, no rescue DAG), 3 no schedd.
    """
    from dagflow.engines.condor.engine import resubmit_condor

    try:
        layout = find_run(runs_dir, run_id)
        submission = resubmit_condor(layout, dry_run=dry_run)
    except DagflowError as error:
        fail(error)
    _submitted(submission, submission.prepared.target.describe(), json_output)


def run_on_condor(
    pipeline: Path | None,
    resume: str | None,
    run_id: str | None,
    runs_dir: Path,
    json_output: bool,
) -> int:
    """`dagflow run --engine condor`: submit the DAG (or, with --resume, its rescue DAG) to the schedd,
    wait until DAGMan ends, print the status; the exit code. A condor run never continues locally."""
    from dagflow.cli.submit_cmds import print_run_status
    from dagflow.engines.condor.engine import prepare_condor, resubmit_condor, submit_prepared, wait_condor
    from dagflow.engines.condor.schedd import ScheddTarget

    try:
        if resume is not None:
            if pipeline is not None or run_id is not None:
                raise CondorUsageError("--resume continues an existing run: give no pipeline and no --run-id")
            layout = find_run(runs_dir, resume)
            from dagflow.engines.condor.observe import read_condor_status

            if read_condor_status(layout).state != "succeeded":
                submission = resubmit_condor(layout)
                print(f"resubmitted run {layout.run_id}: DAGMan job {submission.cluster}.0", file=sys.stderr)
        else:
            if pipeline is None:
                raise CondorUsageError("give a pipeline file to run, or --resume RUN_ID")
            plan = load_plan_or_exit(pipeline, run_id)
            prepared = prepare_condor(plan, runs_dir, ScheddTarget())
            submission = submit_prepared(prepared)
            layout = prepared.layout
            print(f"submitted run {layout.run_id}: DAGMan job {submission.cluster}.0; waiting for it", file=sys.stderr)
        wait_condor(layout)
    except DagflowError as error:
        fail(error)
    return print_run_status(layout, json_output)


class CondorUsageError(DagflowError):
    pass
