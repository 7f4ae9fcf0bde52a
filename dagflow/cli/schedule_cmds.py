"""`dagflow schedule install|list|remove|run`: run a pipeline on its `schedule:` with cron or HTCondor."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dagflow.cli.common import OnlyOption, SetOption, fail
from dagflow.cli.root import app
from dagflow.errors import DagflowError

if TYPE_CHECKING:
    from dagflow.schedule.entries import Entry, RunFlags

schedule_app = typer.Typer(
    help="Run a pipeline on its schedule: block, from your crontab or as an HTCondor cron job.",
    no_args_is_help=True,
)
app.add_typer(schedule_app, name="schedule")

PipelineArg = Annotated[Path, typer.Argument(help="The pipeline file (its schedule: block says when).")]


def _entries(pipeline: Path, flags: RunFlags | None = None, condor: bool = False):  # -> list[Entry]
    from dagflow.engines.registry import spec_checks
    from dagflow.schedule.entries import entries
    from dagflow.spec import load_spec

    return entries(load_spec(pipeline, spec_checks()), flags, condor)


def _fire_times(cron: str) -> str:
    from dagflow.spec.cron import next_fire_times

    return ", ".join(when.strftime("%Y-%m-%d %H:%M") for when in next_fire_times(cron, datetime.now()))


def _install_condor(entry: Entry, variables: dict[str, str], submit: bool, show: bool) -> None:
    from dagflow.schedule import condor as condor_job

    if show:
        sys.stdout.write(condor_job.submit_description(entry, variables))
        print(f"# not installed: `dagflow schedule install --condor {entry.pipeline}` submits it", file=sys.stderr)
        return
    if not submit:
        path = condor_job.write_submit_file(entry, variables)  # refuses per-value schedules
        print(f"wrote {path} ({entry.cron}); submit it with: condor_submit {path}")
        return
    installed = condor_job.install(entry, variables)
    verb = f"replaced {installed.replaced} earlier cron job(s) with" if installed.replaced else "submitted"
    print(f"{verb} HTCondor cron job {installed.cluster}.0 for {entry.pipeline} ({installed.submit_file})")
    print(f"  {entry.cron}: next {_fire_times(entry.cron)}")


@schedule_app.command("install")
def install_command(
    pipeline: PipelineArg,
    condor: Annotated[
        bool, typer.Option("--condor", help="Submit an HTCondor cron job (runs `dagflow submit`) instead.")
    ] = False,
    no_submit: Annotated[
        bool, typer.Option("--no-submit", help="With --condor: only write the submit file; submit nothing.")
    ] = False,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", metavar="NAME", help="Also set this variable (from this shell), e.g. AWS_PROFILE."),
    ] = None,
    show: Annotated[
        bool, typer.Option("--print", help="Only print the crontab lines (or the submit file); install nothing.")
    ] = False,
    only: OnlyOption = None,
    sets: SetOption = None,
    force: Annotated[
        list[str] | None,
        typer.Option("--force", metavar="STEP", help="Each firing runs this step (and what follows) even if cached."),
    ] = None,
) -> None:
    """Install the pipeline's schedule in your crontab (a marked block; installing again replaces it).

    Each line runs `flock -n LOCK PYTHON -m dagflow run PIPELINE` from the pipeline's directory with
    PATH and the virtual environment set, so a firing never overlaps the previous one and needs
    nothing from your shell; output is appended to .dagflow/schedule/<name>.log beside the pipeline
    (<name>: the pipeline's name). --only, --set and --force are passed on to each firing's run, checked
    against the pipeline now. A `per` schedule's lines are spread over the hour (see the README).

    With --condor: write .dagflow/schedule/<file>.condor.sub (a local-universe cron job that runs
    `dagflow submit`) and submit it to the local schedd, replacing the job of an earlier install.
    Exit status 3 when no schedd can be reached.
    """
    from dagflow.schedule import crontab
    from dagflow.schedule.entries import RunFlags, environment

    try:
        entries = _entries(pipeline, RunFlags(only or (), sets or (), force or ()), condor)
        variables = environment(env or [])
        if not show:
            for entry in entries:
                entry.log.parent.mkdir(parents=True, exist_ok=True)
        if condor:
            _install_condor(entries[0], variables, submit=not no_submit, show=show)
            return
        lines = crontab.block(entries, variables)
        if show:
            print("\n".join(lines))
            print(f"# not installed: `dagflow schedule install {entries[0].pipeline}` writes these lines",
                  file=sys.stderr)  # fmt: skip
            return
        replaced = crontab.install(entries[0].pipeline, lines)
    except DagflowError as error:
        fail(error)
    verb = "replaced" if replaced else "installed"
    print(f"{verb} {len(entries)} crontab line{'s' if len(entries) != 1 else ''} for {entries[0].pipeline}:")
    for entry in entries:
        label = f" ({entry.select[0]}={entry.select[1]})" if entry.select else ""
        print(f"  {entry.cron}{label}: next {_fire_times(entry.cron)}; log {entry.log}")


@schedule_app.command("list")
def list_command(
    pipeline: Annotated[Path | None, typer.Argument(help="Only this pipeline [default: every one].")] = None,
) -> None:
    """Show the installed dagflow schedules (crontab lines, and HTCondor cron jobs in the local schedd's
    queue) with their next three fire times."""
    from dagflow.schedule import condor as condor_job
    from dagflow.schedule import crontab

    try:
        blocks = crontab.installed_blocks(crontab.read_crontab())
    except DagflowError as error:
        fail(error)
    shown: dict[str, list[str]] = {}
    for path, lines in blocks.items():
        for line in lines:
            if line.strip() and not line.lstrip().startswith("#"):
                only = line.split("--only ", 1)[1].split()[0] if "--only " in line else ""
                shown.setdefault(path, []).append(_schedule_line(" ".join(line.split()[:5]), only))
    try:
        for path, cluster, cron in condor_job.queued():
            shown.setdefault(path, []).append(_schedule_line(cron, f"HTCondor cron job {cluster}"))
    except DagflowError as error:  # HTCondor is configured here, but its schedd does not answer
        print(f"HTCondor cron jobs not listed: {error}", file=sys.stderr)
    if pipeline is not None:
        key = str(pipeline.absolute())
        shown = {key: shown[key]} if key in shown else {}
    if not shown:
        print(f"no dagflow schedule installed{f' for {pipeline}' if pipeline else ''}")
        return
    for path, lines in shown.items():
        print(path)
        for line in lines:
            print(line)


def _schedule_line(cron: str, label: str) -> str:
    from dagflow.spec.cron import CronError

    try:
        when = _fire_times(cron)
    except CronError as error:
        when = f"not a valid schedule ({error})"
    return f"  {cron}{f' ({label})' if label else ''}: next {when}"


def _remove_condor(path: Path) -> None:
    from dagflow.schedule import condor as condor_job

    jobs = condor_job.uninstall(path)
    print(f"removed {jobs} HTCondor cron job(s) for {path}" if jobs else f"no HTCondor cron job queued for {path}")


@schedule_app.command("remove")
def remove_command(pipeline: PipelineArg) -> None:
    """Remove the pipeline's block from your crontab (other lines stay as they are) and its HTCondor
    cron job from the queue, if `install --condor` submitted one."""
    from dagflow.schedule import condor as condor_job
    from dagflow.schedule import crontab

    path = pipeline.absolute()
    try:
        condor = condor_job.is_installed(path)
        if condor:
            _remove_condor(path)
        removed = crontab.remove(path) if crontab.available() else False
    except DagflowError as error:
        fail(error)
    if removed:
        print(f"removed the crontab schedule for {path}")
    elif not condor:
        print(f"no schedule installed for {pipeline}")


@schedule_app.command("run")
def run_command(
    pipeline: PipelineArg,
    only: OnlyOption = None,
    sets: SetOption = None,
    force: Annotated[
        list[str] | None, typer.Option("--force", metavar="STEP", help="Run this step even if cached.")
    ] = None,
) -> None:
    """Run one matrix value's part of a pipeline locally (what a per-value schedule line runs)."""
    from dagflow.cli.common import load_plan_or_exit, runs_dir_of
    from dagflow.engines.registry import load_engine, run_session

    plan = load_plan_or_exit(pipeline, only=only or [], sets=sets or [])
    runs_dir = runs_dir_of(pipeline, None)
    try:
        # this machine, as `dagflow run` runs the whole pipeline
        session = run_session(load_engine("local", runs_dir, {"force": force or []}))
        layout, work = session.start(plan, Path(runs_dir))
        code = session.run(layout, work, json_output=False)
    except DagflowError as error:
        fail(error)
    raise typer.Exit(code or 0)  # the local engine always shows the outcome itself
