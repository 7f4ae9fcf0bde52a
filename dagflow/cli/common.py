"""Helpers shared by command modules: turn user errors into clean messages and exit codes (printed as
cli/messages.py prints them), the options several commands share."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from dagflow.cli.messages import JSON_ERRORS, print_spec_warnings, show_error
from dagflow.errors import DagflowError, Diagnostic, SpecError

if TYPE_CHECKING:
    from dagflow.plan.searched import SearchedParams
    from dagflow.spec import Spec


def note_json(ctx: typer.Context, value: bool) -> bool:
    """Callback of every --json option; the note ends with the command (tests run many in one process)."""
    if value:
        token = JSON_ERRORS.set(True)
        ctx.call_on_close(lambda: JSON_ERRORS.reset(token))
    return value


# Options several commands share, spelled and documented once.
RunsDirOption = Annotated[Path, typer.Option("--runs-dir", help="Where runs live.", show_default=True, file_okay=False)]
# The runs dir of commands that start or find a pipeline's runs: by default beside the pipeline file.
PipelineRunsDirOption = Annotated[
    Path | None,
    typer.Option(
        "--runs-dir", file_okay=False, show_default=False,
        help="Where runs live [default: .dagflow/runs beside the pipeline file; a run is looked for in "
        "./.dagflow/runs and in those of the pipelines run from this directory].",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Machine-readable output (errors too: one JSON object).", callback=note_json)
]
OnlyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--only", metavar="AXIS=VALUE", show_default=False,
        help="Only the nodes whose matrix value on AXIS is VALUE, e.g. --only region=us. Repeat it: values of "
        "one axis add up (--only region=us --only region=br: both), different axes narrow (--only region=us "
        "--only size=big: us and big). A node that gathers over AXIS (a report over regions) is left out "
        "unless every node it needs is kept.",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set", metavar="NAME=VALUE", show_default=False,
        help="Use VALUE for the pipeline's param NAME instead of its params: default, e.g. --set alpha=0.5 "
        "(read as YAML: 0.5 is a number, true a boolean; repeatable). Nodes whose command uses the param "
        "change and rerun; the rest stay cached. The run records it (dagflow status shows it).",
    ),
]


def checked_run_id(value: str | None) -> str | None:
    """Callback of every --run-id option: the id is checked as the command line is read."""
    from dagflow.run.ids import RunIdError, validate_run_id

    if value is None:
        return None
    try:
        return validate_run_id(value)
    except RunIdError as error:
        raise typer.BadParameter(str(error)) from None


def fail(error: DagflowError) -> NoReturn:
    show_error(error)
    raise typer.Exit(error.exit_code)


def runs_dir_of(pipeline: Path, given: Path | None) -> Path:
    """Where a new run of pipeline goes: --runs-dir, else .dagflow/runs beside the pipeline file (noted in
    ./.dagflow/other-runs when that is elsewhere, so that status, logs, ... typed here find it too)."""
    from dagflow.run.layout import pipeline_runs_dir, remember_runs_dir

    if given is not None:
        return given
    runs_dir = pipeline_runs_dir(pipeline)
    remember_runs_dir(runs_dir, Path.cwd())
    return runs_dir


def as_typed(runs_dir: Path) -> Path:
    """runs_dir as an engine's hints should show it: `.dagflow/runs` when it is this directory's own."""
    from dagflow.run.layout import DEFAULT_RUNS_DIR

    return DEFAULT_RUNS_DIR if Path(runs_dir).absolute() == Path.cwd() / DEFAULT_RUNS_DIR else runs_dir


def find_run_from(given: Path | None, run_id: str | None):  # -> RunLayout
    """The run a command names (an id, 'latest' or None for the latest): under --runs-dir when given; else
    in ./.dagflow/runs and the runs dirs of pipelines run from here (dagflow/run/layout.py), and an id (or a
    unique start of one) also among every run dagflow knows of and where the engines say it ran
    (dagflow/run/known.py)."""
    from dagflow.run.known import resolve_run
    from dagflow.run.layout import find_run, locate_run, runs_dirs_seen_from

    if given is not None:
        return find_run(given, run_id)
    seen = runs_dirs_seen_from(Path.cwd())
    if run_id is None or run_id == "latest":
        return locate_run(seen, run_id)
    return resolve_run(run_id, seen, _run_dirs_engines_know)


def _run_dirs_engines_know(prefix: str) -> list[Path]:
    """The run directories the engines that can say (their `locate_runs`) know for a run id prefix."""
    from dagflow.engines.registry import engine_feature, engine_names, engine_provides

    found: list[Path] = []
    for name in engine_names():
        try:
            if engine_provides(name, "locate_runs"):
                found += engine_feature(name, "locate_runs")(prefix)
        except DagflowError:  # not available here (htcondor2 missing): it knows nothing
            continue
    return found


ParamsFromSearchOption = Annotated[
    str | None,
    typer.Option(
        "--params-from-search", metavar="NAME", show_default=False,
        help="Take the params from search NAME's best trial, each region's own for a per-region search (as "
        "`params: {from_search: NAME}` in the pipeline, which this replaces); --set still wins. The search must "
        "have ended; the run records each region's trial (dagflow status and dagflow report show them).",
    ),
]
SearchDbOption = Annotated[
    Path | None,
    typer.Option(
        "--search-db", dir_okay=False, show_default=False,
        help="The search database of --params-from-search or from_search [default: .dagflow/search.db beside "
        "the pipeline file, else in this directory].",
    ),
]


@dataclass(frozen=True, slots=True)
class ParamsSource:
    """Where a run takes params from a search: --params-from-search (None: the pipeline's from_search) and
    --search-db (None: the default places)."""

    search: str | None = None
    db: Path | None = None


NO_PARAMS_SOURCE = ParamsSource()


def load_plan_or_exit(
    path: Path,
    run_id: str | None = None,
    honoured_by: str | None = None,
    only: Sequence[str] | None = None,
    sets: Sequence[str] | None = None,
    engine_settings: Mapping[str, Any] | None = None,
    params_source: ParamsSource = NO_PARAMS_SOURCE,
):  # -> Plan
    """Load, validate and expand a pipeline file, with the --only and --set given and the params of a search
    (params_source, or the pipeline's `params: {from_search: NAME}`); on bad input print every diagnostic and
    exit 2. The one loader of run, submit, plan and compile.

    The engines' spec checks run with it (registry.spec_checks): honoured_by's with its engine_settings, every
    other engine's on the fields the document sets. Warnings (a deprecated key; with honoured_by, each step
    field that engine ignores) go to stderr.
    """
    from dagflow.engines.registry import spec_checks
    from dagflow.plan.overrides import parse_overrides, plan_with
    from dagflow.run.ids import validate_run_id
    from dagflow.run.resources.auto import AutoResources
    from dagflow.spec import load_spec

    try:
        if run_id is not None:
            validate_run_id(run_id)  # before it names a directory ({run.id} in paths, the run directory)
        overrides = parse_overrides(only or (), sets or ())
        spec = load_spec(path, spec_checks(honoured_by, engine_settings))
        print_spec_warnings(spec, honoured_by)
        searched = _searched_params(path, spec, params_source, overrides.only)
        if searched is not None:
            overrides = dataclasses.replace(overrides, searched=searched)
        return plan_with(spec, run_id, overrides, resolve=AutoResources(spec).resolve)
    except DagflowError as error:
        fail(error)


def _searched_params(
    path: Path, spec: Spec, source: ParamsSource, only: Mapping[str, Sequence[str]]
) -> SearchedParams | None:
    """The search results the run takes (plan/searched.py SearchedParams), or None. An error about the
    pipeline's from_search is located at it; one about --params-from-search names the flag."""
    name = source.search or spec.model.from_search
    if name is None:
        return None
    from dagflow.run.layout import pipeline_runs_dir
    from dagflow.search.results import SearchResultError, search_db, searched_params
    from dagflow.search.store import DEFAULT_DB
    from dagflow.spec.model import FROM_SEARCH

    try:
        if source.db is not None and not source.db.is_file():
            raise SearchResultError(f"--search-db {source.db}: no such file")
        candidates = [source.db] if source.db else [pipeline_runs_dir(path).parent / DEFAULT_DB.name, DEFAULT_DB]
        return searched_params(search_db([Path(c).absolute() for c in candidates], name), name, spec, only)
    except SearchResultError as error:
        if source.search is not None:
            raise SearchResultError(f"--params-from-search {name}: {error}") from None
        line, column = spec.positions.of(("params", FROM_SEARCH))
        where = spec.filename or str(spec.file)
        raise SpecError([Diagnostic(where, line, column, f"params.{FROM_SEARCH}", str(error))]) from None

