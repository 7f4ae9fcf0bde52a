"""`dagflow schedule install --condor`: an HTCondor cron job instead of a crontab line.

A local-universe job on the submit machine that the schedd starts at the cron times and keeps in the
queue between them (on_exit_remove = false); each firing runs `dagflow submit`, which hands the
pipeline's DAG to the pool. One job holds one firing at a time, so firings never overlap.
"""

from __future__ import annotations

from dagflow.schedule.entries import SCHEDULE_DIR, Entry, ScheduleError

CRON_COMMANDS = ("cron_minute", "cron_hour", "cron_day_of_month", "cron_month", "cron_day_of_week")


def _quoted_arguments(args: list[str]) -> str:
    """HTCondor's new argument syntax: the whole list in double quotes, each argument in single quotes."""
    for arg in args:
        if '"' in arg or "\n" in arg:
            raise ScheduleError(f"argument {arg!r} cannot be written into a submit file")
    return '"' + " ".join("'" + arg.replace("'", "''") + "'" for arg in args) + '"'


def _quoted_environment(env: dict[str, str]) -> str:
    for name, value in env.items():
        if '"' in value or "\n" in value:
            raise ScheduleError(f"environment variable {name} cannot be written into a submit file")
    return '"' + " ".join(f"{name}='" + value.replace("'", "''") + "'" for name, value in env.items()) + '"'


def submit_description(entry: Entry, env: dict[str, str]) -> str:
    if entry.select is not None:
        raise ScheduleError("schedule.per is not supported with --condor: `dagflow submit` runs the whole "
                            "pipeline; install per-value schedules as crontab lines instead")
    fields = entry.cron.split(" ")
    log_stem = entry.workdir / SCHEDULE_DIR / f"{entry.name}.condor"
    args = ["-m", "dagflow", "submit", "--engine", "condor", str(entry.pipeline)]
    lines = [
        f"# dagflow schedule for {entry.pipeline}: submit with condor_submit, remove with condor_rm",
        "universe          = local",
        f"executable        = {entry.python}",
        f"arguments         = {_quoted_arguments(args)}",
        f"initialdir        = {entry.workdir}",
        f"environment       = {_quoted_environment(env)}",
        f"output            = {log_stem}.out",
        f"error             = {log_stem}.err",
        f"log               = {log_stem}.log",
        *(f"{command:<17} = {value}" for command, value in zip(CRON_COMMANDS, fields, strict=True)),
        "on_exit_remove    = false",
        f"My.DagflowSchedule = \"{entry.name}\"",
        "queue",
    ]
    return "\n".join(lines) + "\n"
