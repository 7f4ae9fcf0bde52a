"""`dagflow schedule install --condor`: an HTCondor cron job instead of a crontab line.

A local-universe job on the submit machine that the schedd starts at the cron times and keeps in the
queue between them (on_exit_remove = false); each firing runs `dagflow submit`, which hands the
pipeline's DAG to the pool. One job holds one firing at a time, so firings never overlap.

`install` writes .dagflow/schedule/NAME.condor.sub, removes the job an earlier install left in the
queue and submits the new one to the local schedd; NAME.condor.json records it, so `dagflow schedule
remove` knows to remove it. The HTCondor side (the submit description, the schedd) is the condor engine's
(engines/condor/cron.py), reached through the engine registry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from dagflow.engines.registry import engine_feature
from dagflow.schedule.entries import SCHEDULE_DIR, Entry, ScheduleError, literal, schedule_name


@dataclass(frozen=True, slots=True)
class Installed:
    cluster: int
    replaced: int  # cron jobs of an earlier install removed from the queue
    submit_file: Path


def _cron() -> ModuleType:
    """The condor engine's cron jobs (engines/condor/cron.py)."""
    return engine_feature("condor", "cron")


def submit_description(entry: Entry, env: dict[str, str]) -> str:
    """The cron job's submit file: what `install --condor` writes and `install --condor --print` shows."""
    if entry.select is not None:
        raise ScheduleError("schedule.per is not supported with --condor: `dagflow submit` runs the whole "
                            "pipeline; install per-value schedules as crontab lines instead")
    literal(str(entry.pipeline), "pipeline path")
    log_stem = Path(f"{entry.log_stem}.condor")
    try:
        return _cron().submit_description(
            entry.name, entry.cron, entry.pipeline, entry.python, entry.workdir, log_stem, env, entry.run_flags
        )
    except ValueError as error:  # escape.py's refusal
        raise ScheduleError(f"cannot write the HTCondor schedule: {error}") from None


def submit_file(entry: Entry) -> Path:
    return entry.workdir / SCHEDULE_DIR / f"{entry.name}.condor.sub"


def record_file(pipeline: Path) -> Path:
    return pipeline.parent / SCHEDULE_DIR / f"{schedule_name(pipeline)}.condor.json"


def write_submit_file(entry: Entry, env: dict[str, str]) -> Path:
    path = submit_file(entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(submit_description(entry, env), encoding="utf-8")
    return path


def install(entry: Entry, env: dict[str, str]) -> Installed:
    """Write the submit file and submit it, replacing a cron job an earlier install left in the queue."""
    path = write_submit_file(entry, env)
    cron = _cron()
    cluster, replaced = cron.submit(path, entry.pipeline)
    record = {"cluster": cluster, "submit_file": str(path), "condor_config": cron.condor_config()}
    record_file(entry.pipeline).write_text(json.dumps(record) + "\n", encoding="utf-8")
    return Installed(cluster, replaced, path)


def is_installed(pipeline: Path) -> bool:
    return record_file(pipeline).is_file()


def uninstall(pipeline: Path) -> int:
    """Remove the pipeline's cron job from the queue and forget it; how many jobs were removed."""
    removed = _cron().remove(pipeline)
    record_file(pipeline).unlink(missing_ok=True)
    return removed


def queued() -> list[tuple[str, int, str]]:
    """The dagflow cron jobs in the local schedd's queue: (pipeline, cluster, cron fields)."""
    return _cron().queued()
