"""`dagflow schedule install --condor`: an HTCondor cron job instead of a crontab line.

A local-universe job on the submit machine that the schedd starts at the cron times and keeps in the
queue between them (on_exit_remove = false); each firing runs `dagflow submit`, which hands the
pipeline's DAG to the pool. One job holds one firing at a time, so firings never overlap.

`install` writes .dagflow/schedule/NAME.condor.sub, removes the job an earlier install left in the
queue and submits the new one to the local schedd; NAME.condor.json records it, so `dagflow schedule
remove` knows to remove it. Jobs are found by their DagflowSchedulePipeline attribute, not by a cluster
id alone: a record lost or stale never leaves a second cron job behind.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import classad2

from dagflow.engines.condor import escape
from dagflow.schedule.entries import SCHEDULE_DIR, Entry, ScheduleError, literal, schedule_name

CRON_COMMANDS = ("cron_minute", "cron_hour", "cron_day_of_month", "cron_month", "cron_day_of_week")
PIPELINE_ATTRIBUTE = "DagflowSchedulePipeline"
# Where HTCondor looks for its configuration when CONDOR_CONFIG is not set (after /etc/condor).
DEFAULT_CONFIGS = ("/etc/condor/condor_config", "/usr/local/etc/condor_config")


@dataclass(frozen=True, slots=True)
class Installed:
    cluster: int
    replaced: int  # cron jobs of an earlier install removed from the queue
    submit_file: Path


def _escaped(quote: Callable[..., str], value: Any, what: str) -> str:
    """escape.py's quoting, its refusal turned into a ScheduleError (exit 2)."""
    try:
        return quote(value, what)
    except ValueError as error:
        raise ScheduleError(f"cannot write the HTCondor schedule: {error}") from None


def condor_config() -> str | None:
    """The HTCondor configuration this shell uses: CONDOR_CONFIG, else the first default that exists."""
    given = os.environ.get("CONDOR_CONFIG")
    if given:
        return given
    return next((path for path in DEFAULT_CONFIGS if Path(path).is_file()), None)


def condor_environment(env: dict[str, str]) -> dict[str, str]:
    """The job's environment: env plus what `dagflow submit` needs to reach this schedd.

    The schedd starts a local-universe job with CONDOR_CONFIG=/dev/null, so the bindings would find no
    schedd; and DAGMan's path comes from PATH (condor_dagman), which the job's PATH must therefore hold.
    """
    result = dict(env)
    config = condor_config()
    if config is not None:
        result["CONDOR_CONFIG"] = config
    dagman = shutil.which("condor_dagman")
    if dagman is not None:
        tools = str(Path(dagman).parent)
        path = result.get("PATH", "")
        if tools not in path.split(":"):
            result["PATH"] = f"{path}:{tools}" if path else tools
    return result


def submit_description(entry: Entry, env: dict[str, str]) -> str:
    if entry.select is not None:
        raise ScheduleError("schedule.per is not supported with --condor: `dagflow submit` runs the whole "
                            "pipeline; install per-value schedules as crontab lines instead")
    fields = entry.cron.split(" ")
    log_stem = entry.workdir / SCHEDULE_DIR / f"{entry.name}.condor"
    args = ["-m", "dagflow", "submit", "--engine", "condor", str(entry.pipeline)]
    path_of = escape.submit_literal
    lines = [
        f"# dagflow schedule for {literal(str(entry.pipeline), 'pipeline path')}: "
        "`dagflow schedule remove` (or condor_rm) removes it",
        "universe          = local",
        f"executable        = {_escaped(path_of, str(entry.python), 'executable')}",
        f'arguments         = "{_escaped(escape.arguments, args, "arguments")}"',
        f"initialdir        = {_escaped(path_of, str(entry.workdir), 'initialdir')}",
        f'environment       = "{_escaped(escape.environment, condor_environment(env), "environment")}"',
        f"output            = {_escaped(path_of, f'{log_stem}.out', 'output')}",
        f"error             = {_escaped(path_of, f'{log_stem}.err', 'error')}",
        f"log               = {_escaped(path_of, f'{log_stem}.log', 'log')}",
        *(f"{command:<17} = {value}" for command, value in zip(CRON_COMMANDS, fields, strict=True)),
        "on_exit_remove    = false",
        f"My.DagflowSchedule = {_escaped(escape.classad_string, entry.name, 'schedule name')}",
        f"My.{PIPELINE_ATTRIBUTE} = {_escaped(escape.classad_string, str(entry.pipeline), 'pipeline path')}",
        "queue",
    ]
    return "\n".join(lines) + "\n"


def submit_file(entry: Entry) -> Path:
    return entry.workdir / SCHEDULE_DIR / f"{entry.name}.condor.sub"


def record_file(pipeline: Path) -> Path:
    return pipeline.parent / SCHEDULE_DIR / f"{schedule_name(pipeline)}.condor.json"


def write_submit_file(entry: Entry, env: dict[str, str]) -> Path:
    path = submit_file(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(submit_description(entry, env), encoding="utf-8")
    return path


def _constraint(pipeline: Path) -> str:
    return f"{PIPELINE_ATTRIBUTE} == {classad2.quote(str(pipeline))}"


def _schedd():  # -> htcondor2.Schedd
    from dagflow.engines.condor.schedd import ScheddTarget, connect

    return connect(ScheddTarget())


def _remove_jobs(schedd, pipeline: Path, reason: str) -> int:  # schedd: htcondor2.Schedd
    """Remove this pipeline's cron jobs from the queue; how many the schedd removed."""
    import htcondor2

    from dagflow.engines.condor.schedd import CondorUnreachableError

    try:
        answer = schedd.act(htcondor2.JobAction.Remove, _constraint(pipeline), reason=reason)
    except Exception as error:  # htcondor2's HTCondorException
        raise CondorUnreachableError(f"cannot remove the cron job of {pipeline}: {error}") from None
    removed = answer.get("TotalSuccess", 0)
    return removed if isinstance(removed, int) else 0


def install(entry: Entry, env: dict[str, str]) -> Installed:
    """Write the submit file and submit it, replacing a cron job an earlier install left in the queue."""
    import htcondor2

    from dagflow.engines.condor.schedd import CondorUnreachableError

    path = write_submit_file(entry, env)
    schedd = _schedd()
    replaced = _remove_jobs(schedd, entry.pipeline, "replaced by `dagflow schedule install --condor`")
    try:
        cluster = int(schedd.submit(htcondor2.Submit(path.read_text(encoding="utf-8"))).cluster())
    except Exception as error:  # htcondor2's HTCondorException
        raise CondorUnreachableError(f"cannot submit the cron job {path}: {' '.join(str(error).split())}") from None
    record = {"cluster": cluster, "submit_file": str(path), "condor_config": condor_config()}
    record_file(entry.pipeline).write_text(json.dumps(record) + "\n", encoding="utf-8")
    return Installed(cluster, replaced, path)


def is_installed(pipeline: Path) -> bool:
    return record_file(pipeline).is_file()


def uninstall(pipeline: Path) -> int:
    """Remove the pipeline's cron job from the queue and forget it; how many jobs were removed."""
    removed = _remove_jobs(_schedd(), pipeline, "dagflow schedule remove")
    record_file(pipeline).unlink(missing_ok=True)
    return removed
