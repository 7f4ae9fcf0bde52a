"""HTCondor commands: compile a pipeline to DAGMan input and lint generated DAG files. The condor engine
provides both (its declaration's `compile` and `lint`), reached through the engine registry like running on
a pool (`dagflow submit|run --engine condor`, `resubmit`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import OnlyOption, SetOption, checked_run_id, fail, load_plan_or_exit
from dagflow.cli.root import app
from dagflow.errors import EXIT_USAGE, CannotWriteError, DagflowError


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
    data_mode: Annotated[
        str | None,
        typer.Option("--data-mode", metavar="transfer|shared", show_default=False,
                     help="transfer: nothing shared, HTCondor moves declared inputs, scripts and outputs; shared: "
                     "jobs run in the pipeline's directory (default: the pipeline's condor.data_mode, else transfer)."),
    ] = None,
    only: OnlyOption = None,
    sets: SetOption = None,
) -> None:
    """Compile a pipeline into HTCondor DAGMan input, ready for condor_submit_dag.

    Writes <pipeline>.dag (JOB, VARS, RETRY, PRIORITY, CATEGORY, PARENT lines for every node),

    one <step>.sub per step (filled from submit/<kind>.sub), and logs/ for each node's stdout/stderr.

    In the transfer data mode (the default) jobs run in their scratch directory with their declared inputs and
    scripts transferred in and declared outputs back; in the shared mode, `/usr/bin/env <argv>` in the
    pipeline's directory on a shared filesystem.

    GPU steps require HAS_GPU, GPU memory and CUDA capability, and share the throttled `gpu` category.

    Nothing is submitted: run `condor_submit_dag DIR/<pipeline>.dag`; check first with `dagflow lint DIR`.

    Exit code 2 on an invalid pipeline or on a value that cannot be written safely.
    """
    from dagflow.engines.registry import engine_feature

    plan = load_plan_or_exit(pipeline, run_id, only=only, sets=sets, engine_settings={"data_mode": data_mode},
                             honoured_by="condor")
    out_dir = output if output is not None else Path(".dagflow") / "runs" / plan.run_id / "condor"
    try:
        compile_dag = engine_feature("condor", "compile")  # engines/condor/compile.py
        dag = compile_dag(plan, out_dir, max_gpu_jobs, data_mode)
    except DagflowError as error:
        fail(error)
    except OSError as error:
        fail(CannotWriteError(error, out_dir))
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
    from dagflow.engines.registry import engine_feature

    try:
        lint = engine_feature("condor", "lint")  # engines/condor/lint.py
    except DagflowError as error:
        fail(error)
    if not target.exists():
        print(f"error: {target} does not exist", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    checker = None if builtin else lint.find_checker(dag_checker)
    if checker is not None and not checker.is_file():
        print(f"error: condor_dag_checker {checker} does not exist", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    files = lint.dag_files(target)
    if not files:
        print(f"error: no .dag file in {target}", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
    checked_by = f"{checker} and dagflow" if checker else "dagflow's parser (no condor_dag_checker)"
    errors = 0
    for path in files:
        problems = lint.lint_dag(path, checker)
        for problem in problems:
            print(problem.render(), file=sys.stderr)
        count = sum(1 for problem in problems if problem.severity == "error")
        errors += count
        if not count:
            print(f"{path}: ok (checked by {checked_by})")
    if errors:
        print(f"{errors} error{'s' if errors != 1 else ''} found (checked by {checked_by})", file=sys.stderr)
        raise typer.Exit(EXIT_USAGE)
