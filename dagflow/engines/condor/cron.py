"""An HTCondor cron job (`dagflow schedule install --condor`), the HTCondor side: its submit description, and
submitting it to the local schedd or removing it there. settings.py declares it (`provides`: cron); the
schedule client (dagflow/schedule/condor.py) reaches it through the registry and keeps what is no scheduler's
own: which pipeline, where the files go, the record of an install.

A local-universe job on the submit machine that the schedd starts at the cron times and keeps in the queue
between them (on_exit_remove = false). Jobs are found by their DagflowSchedulePipeline attribute, not by a
cluster id alone: a record lost or stale never leaves a second cron job behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import classad2

from dagflow.engines.condor import escape
from dagflow.engines.condor.schedd import CondorUnreachableError, ScheddTarget, connect

CRON_COMMANDS = ("cron_minute", "cron_hour", "cron_day_of_month", "cron_month", "cron_day_of_week")
CRON_ATTRIBUTES = ("CronMinute", "CronHour", "CronDayOfMonth", "CronMonth", "CronDayOfWeek")  # what they set
PIPELINE_ATTRIBUTE = "DagflowSchedulePipeline"
# Where HTCondor looks for its configuration when CONDOR_CONFIG is not set (after /etc/condor).
DEFAULT_CONFIGS = ("/etc/condor/condor_config", "/usr/local/etc/condor_config")


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


def submit_description(
    name: str,
    cron: str,
    pipeline: Path,
    python: Path,
    workdir: Path,
    log_stem: Path,
    env: dict[str, str],
    run_flags: Sequence[str] = (),
) -> str:
    """The cron job's submit description: `python -m dagflow submit --engine condor pipeline [run_flags]` from
    workdir at the cron times (five fields), logs at log_stem.{out,err,log}. ValueError (from escape.py) names
    a value that cannot be written into a submit file."""
    args = ["-m", "dagflow", "submit", "--engine", "condor", str(pipeline), *run_flags]
    path_of = escape.submit_literal
    lines = [
        f"# dagflow schedule for {pipeline}: `dagflow schedule remove` (or condor_rm) removes it",
        "universe          = local",
        f"executable        = {path_of(str(python), 'executable')}",
        f'arguments         = "{escape.arguments(args, "arguments")}"',
        f"initialdir        = {path_of(str(workdir), 'initialdir')}",
        f'environment       = "{escape.environment(condor_environment(env), "environment")}"',
        f"output            = {path_of(f'{log_stem}.out', 'output')}",
        f"error             = {path_of(f'{log_stem}.err', 'error')}",
        f"log               = {path_of(f'{log_stem}.log', 'log')}",
        *(f"{command:<17} = {value}" for command, value in zip(CRON_COMMANDS, cron.split(" "), strict=True)),
        "on_exit_remove    = false",
        f"My.DagflowSchedule = {escape.classad_string(name, 'schedule name')}",
        f"My.{PIPELINE_ATTRIBUTE} = {escape.classad_string(str(pipeline), 'pipeline path')}",
        "queue",
    ]
    return "\n".join(lines) + "\n"


def _constraint(pipeline: Path) -> str:
    return f"{PIPELINE_ATTRIBUTE} == {classad2.quote(str(pipeline))}"


def _remove_jobs(schedd: Any, pipeline: Path, reason: str) -> int:  # schedd: htcondor2.Schedd
    """Remove this pipeline's cron jobs from the queue; how many the schedd removed."""
    import htcondor2

    try:
        answer = schedd.act(htcondor2.JobAction.Remove, _constraint(pipeline), reason=reason)
    except Exception as error:  # htcondor2's HTCondorException
        raise CondorUnreachableError(f"cannot remove the cron job of {pipeline}: {error}") from None
    removed = answer.get("TotalSuccess", 0)
    return removed if isinstance(removed, int) else 0


def submit(submit_file: Path, pipeline: Path) -> tuple[int, int]:
    """Submit the cron job in submit_file to the local schedd, replacing the pipeline's cron jobs an earlier
    install left in the queue: (its cluster, how many were replaced)."""
    import htcondor2

    schedd = connect(ScheddTarget())
    replaced = _remove_jobs(schedd, pipeline, "replaced by `dagflow schedule install --condor`")
    try:
        cluster = int(schedd.submit(htcondor2.Submit(submit_file.read_text(encoding="utf-8"))).cluster())
    except Exception as error:  # htcondor2's HTCondorException
        raise CondorUnreachableError(
            f"cannot submit the cron job {submit_file}: {' '.join(str(error).split())}"
        ) from None
    return cluster, replaced


def remove(pipeline: Path) -> int:
    """Remove the pipeline's cron jobs from the local schedd's queue; how many were removed."""
    return _remove_jobs(connect(ScheddTarget()), pipeline, "dagflow schedule remove")


def queued() -> list[tuple[str, int, str]]:
    """Every dagflow cron job in the local schedd's queue, whoever installed it: (pipeline, cluster, the five
    cron fields). Empty when no HTCondor is configured here; CondorUnreachableError when its schedd is not."""
    if condor_config() is None:
        return []
    projection = ["ClusterId", PIPELINE_ATTRIBUTE, *CRON_ATTRIBUTES]
    try:
        ads = connect(ScheddTarget()).query(constraint=f"{PIPELINE_ATTRIBUTE} isnt undefined", projection=projection)
    except CondorUnreachableError:
        raise
    except Exception as error:  # htcondor2's HTCondorException
        raise CondorUnreachableError(f"cannot list the HTCondor cron jobs: {' '.join(str(error).split())}") from None
    jobs = []
    for ad in ads:
        fields = " ".join(str(ad.get(name, "*")) for name in CRON_ATTRIBUTES)
        jobs.append((str(ad.get(PIPELINE_ATTRIBUTE, "")), int(ad.get("ClusterId", 0)), fields))
    return sorted(jobs)
