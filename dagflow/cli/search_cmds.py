"""`dagflow search run | status` and `dagflow search --spearmint DIR`: Bayesian optimisation over
trials that run as pipeline runs on any engine, with the search's state in one SQLite file."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dagflow.cli.common import JsonOption, fail
from dagflow.cli.messages import print_spec_warnings
from dagflow.cli.root import app
from dagflow.errors import DagflowError
from dagflow.run.layout import DEFAULT_RUNS_DIR
from dagflow.search.store import DEFAULT_DB
from dagflow.spec.units import DURATION_HELP, parse_duration_s

if TYPE_CHECKING:
    from dagflow.search.scheduler import SchedulerOptions
    from dagflow.search.trials import TrialSource

search_app = typer.Typer(
    help=(
        "Bayesian hyperparameter search: `dagflow search run pipeline.yaml` (the pipeline's search: block), "
        "`dagflow search --spearmint DIR` (a Spearmint experiment), `dagflow search status NAME`."
    ),
    no_args_is_help=False,
    add_completion=False,
)
app.add_typer(search_app, name="search")


class SearchUsageError(DagflowError):
    pass


EngineOption = Annotated[
    str, typer.Option("--engine", help="Where trials run: local, slurm or condor.", show_default=True)
]
NameOption = Annotated[
    str | None, typer.Option("--name", help="The search's name (default: the pipeline's or experiment's).")
]
BudgetOption = Annotated[int | None, typer.Option("--budget", min=1, help="Trials (per region) (default: the spec's).")]
ParallelOption = Annotated[
    int | None, typer.Option("--parallel", min=1, help="Trials running at once (per region) (default: the spec's).")
]
BATCH_HELP = (
    "Synchronous batches: suggest --parallel trials at once and the next ones only when all of them have "
    "ended (every point chosen knowing more results; slots wait for a batch's slowest trial)."
)
BatchOption = Annotated[
    bool | None,
    typer.Option(
        "--batch/--no-batch",
        help=f"{BATCH_HELP} Default: the search block's `batch`, else a new trial whenever one ends.",
        show_default=False,
    ),
]
SERIAL_TAIL_HELP = (
    "Run the last N trials (per region) one at a time, each chosen knowing every earlier result: a fixed "
    "budget ends on better points, at the price of idle slots while they run."
)
SerialTailOption = Annotated[
    int | None,
    typer.Option(
        "--serial-tail",
        min=0,
        metavar="N",
        help=f"{SERIAL_TAIL_HELP} Default: the search block's `serial_tail`, else 0 (off).",
        show_default=False,
    ),
]
SeedOption = Annotated[int | None, typer.Option("--seed", help="Optimiser seed of a new search (default: random).")]
PollOption = Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between looks at running trials.")]
TimeoutOption = Annotated[
    str, typer.Option("--trial-timeout", help=f"Fail (and cancel) a trial running longer: {DURATION_HELP}.")
]
GraceOption = Annotated[
    str, typer.Option("--start-grace", help="How long a submitted trial may take to start before it counts as lost.")
]
JobsOption = Annotated[int | None, typer.Option("--jobs", "-j", min=1, help="Local engine: nodes of a trial at once.")]
GpusOption = Annotated[
    str | None, typer.Option("--gpus", help="Local engine: GPU devices trials use, e.g. 0,1 [default: nvidia-smi].")
]
IdenticalFailuresOption = Annotated[
    int,
    typer.Option(
        "--max-identical-failures",
        min=0,
        help="Stop the search (exit 3) after this many trials in a row failed with the same error; 0: never.",
    ),
]
RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="Where trial runs live.", file_okay=False)]
DbOption = Annotated[Path, typer.Option("--db", help="The search database (SQLite).", dir_okay=False)]


def _duration(option: str, value: str) -> float:
    try:
        return float(parse_duration_s(value))
    except ValueError as error:
        raise SearchUsageError(f"{option}: {error} ({DURATION_HELP})") from None


def _run_search(source_of: Callable[[], TrialSource], options: SchedulerOptions, db: Path) -> int:
    from dagflow.search.scheduler import Scheduler
    from dagflow.search.store import SearchStore

    source = source_of()
    store = SearchStore(db)
    try:
        return Scheduler(source, store, options).run()
    finally:
        store.close()


def _options(
    engine: str,
    name: str | None,
    budget: int | None,
    parallel: int | None,
    batch: bool | None,
    serial_tail: int | None,
    seed: int | None,
    poll: float,
    trial_timeout: str,
    start_grace: str,
    jobs: int | None,
    runs_dir: Path,
    gpus: str | None = None,
    max_identical_failures: int = 3,
) -> SchedulerOptions:
    from dagflow.run.ids import validate_run_id
    from dagflow.search.scheduler import SchedulerOptions
    from dagflow.search.scheduler_engines import EngineChoiceError, engine_names

    if engine not in engine_names():
        raise EngineChoiceError(f"--engine: unknown engine {engine!r}; choose one of {', '.join(engine_names())}")
    if name is not None:
        validate_run_id(name)  # trial run ids start with it
    if gpus is not None:
        from dagflow.engines.registry import engine_feature

        if engine != "local":
            raise SearchUsageError(f"--gpus is for the local engine; the {engine} engine's scheduler picks devices")
        engine_feature(engine, "check_devices")(gpus)  # engines/local/devices.py
    return SchedulerOptions(
        engine=engine,
        name=name,
        budget=budget,
        parallel=parallel,
        batch=batch,
        serial_tail=serial_tail,
        seed=seed,
        poll_s=poll,
        trial_timeout_s=_duration("--trial-timeout", trial_timeout),
        start_grace_s=_duration("--start-grace", start_grace),
        jobs=jobs,
        runs_dir=runs_dir,
        gpus=gpus,
        max_identical_failures=max_identical_failures,
    )


DEFAULT_SPEARMINT_BUDGET = 20
# Spearmint's own command-line flags, each pointed at what dagflow does instead (exit 2, no "No such option").
SPEARMINT_FLAGS = {
    "--method": "dagflow's --optimizer (gp: a GP with expected improvement, as GPEIOptChooser)",
    "--method-args": "none: dagflow's gp optimiser takes no chooser arguments (see --optimizer)",
    "--max-concurrent": "dagflow's --parallel N (or max-concurrent in config.json)",
    "--max-finished-jobs": "dagflow's --budget N (or max-finished-jobs in config.json)",
    "--grid-size": "none: dagflow maximises the acquisition over random candidates with gradient steps, no grid",
    "-w": "dagflow search status NAME (a table, --json, and a convergence PNG)",
}
SpearmintFlag = Annotated[str | None, typer.Option(hidden=True, show_default=False)]


def _refuse_spearmint_flags(given: dict[str, str]) -> None:
    if given:
        lines = [f"{flag} is Spearmint's flag; use {SPEARMINT_FLAGS[flag]}" for flag in given]
        raise SearchUsageError("\n".join(lines))


def _interpreter(given: str) -> str:
    """--python as an absolute path to an executable file (a bare name is looked up on PATH)."""
    import os
    import shutil

    found = shutil.which(given) if os.sep not in given else given
    path = Path(found or given).absolute()
    if not path.is_file():
        raise SearchUsageError(f"--python {given}: no such file (name the interpreter that runs the main file)")
    if not os.access(path, os.X_OK):
        raise SearchUsageError(f"--python {given}: not an executable file (name an interpreter, e.g. /usr/bin/python2)")
    return str(path)


@search_app.callback(invoke_without_command=True)
def search_callback(
    ctx: typer.Context,
    spearmint: Annotated[
        Path | None,
        typer.Option("--spearmint", metavar="DIR", help="Run a Spearmint experiment (DIR/config.json or config.pb)."),
    ] = None,
    optimizer: Annotated[
        str,
        typer.Option("--optimizer", help="Spearmint: gp, random, gp-optuna or tpe-optuna (the last two need Optuna)."),
    ] = "gp",
    engine: EngineOption = "local",
    name: NameOption = None,
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=1, help="Spearmint: jobs to complete [default: max-finished-jobs, else 20]."),
    ] = None,
    parallel: Annotated[
        int | None,
        typer.Option("--parallel", min=1, help="Spearmint: jobs running at once [default: max-concurrent, else 1]."),
    ] = None,
    batch: Annotated[bool, typer.Option("--batch", help=f"Spearmint: {BATCH_HELP}")] = False,
    serial_tail: Annotated[
        int, typer.Option("--serial-tail", min=0, metavar="N", help=f"Spearmint: {SERIAL_TAIL_HELP} 0: off.")
    ] = 0,
    seed: SeedOption = None,
    poll: PollOption = 1.0,
    trial_timeout: TimeoutOption = "7d",
    start_grace: GraceOption = "2m",
    jobs: JobsOption = None,
    max_identical_failures: IdenticalFailuresOption = 3,
    python: Annotated[
        str | None,
        typer.Option(
            "--python",
            metavar="PATH",
            help="Spearmint: the interpreter that runs the main file, e.g. /usr/bin/python2 for Python 2 "
            "main files (default: dagflow's own).",
        ),
    ] = None,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    db: DbOption = DEFAULT_DB,
    method: SpearmintFlag = None,
    method_args: SpearmintFlag = None,
    max_concurrent: SpearmintFlag = None,
    max_finished_jobs: SpearmintFlag = None,
    grid_size: SpearmintFlag = None,
    web_status: Annotated[bool, typer.Option("-w", "--web-status", hidden=True)] = False,
) -> None:
    """Bayesian hyperparameter search. With --spearmint DIR: run a Spearmint experiment the Spearmint
    way, main(job_id, params) once per job with job ids from 1, each job a run on the chosen engine.
    Exit status: 0 done, 1 no trial succeeded (or none satisfied the constraints), 2 bad input (or an
    experiment dagflow cannot run: MATLAB, spearmint-lite), 3 stopped after identical failures, 130 stopped."""
    if ctx.invoked_subcommand is not None:
        if spearmint is not None:
            fail(SearchUsageError("--spearmint runs an experiment by itself: give no subcommand with it"))
        return
    if spearmint is None:
        print(ctx.get_help())
        raise typer.Exit(2)
    from dagflow.search.spearmint import load_experiment
    from dagflow.search.trials import SpearmintTrials

    directory = spearmint
    given = {
        "--method": method,
        "--method-args": method_args,
        "--max-concurrent": max_concurrent,
        "--max-finished-jobs": max_finished_jobs,
        "--grid-size": grid_size,
        "-w": "" if web_status else None,
    }
    try:
        _refuse_spearmint_flags({flag: value for flag, value in given.items() if value is not None})
        if not directory.is_dir():
            raise SearchUsageError(f"--spearmint {directory}: no such directory")
        experiment = load_experiment(directory)
        seed = seed if seed is not None else experiment.seed
        options = _options(
            engine, name, None, None, None, None, seed, poll, trial_timeout, start_grace, jobs, runs_dir,
            max_identical_failures=max_identical_failures,
        )  # fmt: skip
        interpreter = _interpreter(python) if python is not None else None
        code = _run_search(
            lambda: SpearmintTrials(
                experiment,
                budget=budget or experiment.budget or DEFAULT_SPEARMINT_BUDGET,
                parallel=parallel or experiment.parallel or 1,
                optimizer=optimizer,
                batch=batch,
                serial_tail=serial_tail,
                python=interpreter,
            ),
            options,
            db,
        )
    except DagflowError as error:
        fail(error)
    raise typer.Exit(code)


@search_app.command("run")
def run_command(
    pipeline: Annotated[Path, typer.Argument(help="pipeline.yaml with a search: block.", show_default=False)],
    engine: EngineOption = "local",
    name: NameOption = None,
    budget: BudgetOption = None,
    parallel: ParallelOption = None,
    batch: BatchOption = None,
    serial_tail: SerialTailOption = None,
    seed: SeedOption = None,
    poll: PollOption = 1.0,
    trial_timeout: TimeoutOption = "7d",
    start_grace: GraceOption = "2m",
    jobs: JobsOption = None,
    gpus: GpusOption = None,
    max_identical_failures: IdenticalFailuresOption = 3,
    runs_dir: RunsDirOption = DEFAULT_RUNS_DIR,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Run the pipeline's search: suggest, submit trials, collect objectives, until the budget is spent.

    Each trial is a run of the pipeline (one region's sub-DAG with `per: region`) with the trial's
    params, named <search>-t<N>[-<region>]. With `early_stopping:` in the search block, trials that
    append one JSON line per step to their metrics file and trail the others are stopped early (state
    stopped, their last value counted). Ctrl-C cancels running trials; after Ctrl-C or a crash, the
    same command continues the search. Exit status: 0 done, 1 a region had no successful trial,
    2 bad input, 3 stopped after --max-identical-failures trials in a row failed alike, 130 stopped.
    """
    from dagflow.engines.registry import spec_checks
    from dagflow.search.trials import PipelineTrials
    from dagflow.spec import load_spec

    try:
        if not pipeline.is_file():
            raise SearchUsageError(f"{pipeline}: no such file")
        options = _options(
            engine, name, budget, parallel, batch, serial_tail, seed, poll, trial_timeout, start_grace, jobs,
            runs_dir, gpus, max_identical_failures,
        )  # fmt: skip

        def source() -> PipelineTrials:
            spec = load_spec(pipeline, spec_checks(options.engine))  # the trials' engine checks its fields once
            print_spec_warnings(spec)  # the same deprecation warnings `dagflow validate` gives, once
            return PipelineTrials(spec)

        code = _run_search(source, options, db)
    except DagflowError as error:
        fail(error)
    raise typer.Exit(code)


@search_app.command("status")
def status_command(
    search: Annotated[str | None, typer.Argument(help="The search's name (default: the only one).")] = None,
    db: DbOption = DEFAULT_DB,
    json_output: JsonOption = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Where to write the convergence PNG (default: beside the db).", dir_okay=False),
    ] = None,
    no_plot: Annotated[bool, typer.Option("--no-plot", help="Write no PNG.")] = False,
) -> None:
    """A search's trials (params, state, objective, engine job), the best per region, and a
    convergence plot (best so far against trials) written as a PNG."""
    from dagflow.search.report import plot_convergence, render_table, summarise
    from dagflow.search.store import SearchStore

    try:
        if not db.is_file():
            raise SearchUsageError(f"{db}: no search database here (give --db)")
        store = SearchStore(db)
        try:
            names = store.search_names()
            if search is None:
                if len(names) != 1:
                    raise SearchUsageError(f"name a search: {', '.join(names) or 'there are none'} in {db}")
                search = names[0]
            record = store.search(search)
            if record is None:
                raise SearchUsageError(f"no search {search!r} in {db}; searches: {', '.join(names) or 'none'}")
            summary = summarise(record, store.trials(search))
        finally:
            store.close()
    except DagflowError as error:
        fail(error)
    if not no_plot:
        path = plot or db.parent / "searches" / f"{search}-convergence.png"
        summary["plot"] = str(plot_convergence(summary, path))
    if json_output:
        print(json.dumps(summary, separators=(",", ":")))
        return
    print(render_table(summary))
    if "plot" in summary:
        print(f"convergence plot: {summary['plot']}")
    sys.stdout.flush()
