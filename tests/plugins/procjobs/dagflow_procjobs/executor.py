"""run_job, check_active and cancel_jobs for detached processes: a job is the directory
<run dir>/procjobs/<node>.<attempt> (its key, as a path), holding the wrapper's pid and, once it ended, rc.

The directory is made under another name and renamed once the wrapper is started and its pid written; the
wrapper runs the node only once it sees its own pid there. So a driver killed (or a disk filled) at any
moment leaves either a job every later driver finds, or none, never a node that runs unseen."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.jobs.executor import JobExecutor
from dagflow.engines.jobs.job import ACTIVE, ENDED, UNKNOWN, Job, JobState

_WRAPPER = Path(__file__).with_name("wrap.py")


class ProcJobs(JobExecutor):
    name: ClassVar[str] = "procjobs"
    summary: ClassVar[str] = "each node a detached process on this machine"
    system: ClassVar[str] = "this machine"
    honours: ClassVar[frozenset[str]] = frozenset({"priority", "timeout"})
    poll_s: ClassVar[float] = 0.2

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unreachable = int(os.environ.get("PROCJOBS_UNREACHABLE_LOOKS", "0"))
        self._answers = int(os.environ.get("PROCJOBS_DOWN_AFTER_LOOKS", "-1"))
        self.look_grace_s = float(os.environ.get("PROCJOBS_LOOK_GRACE_S", type(self).look_grace_s))  # type: ignore[misc]

    def run_job(self, job: Job) -> str:
        where = _job_dir(job)
        pending = where.with_name(where.name + ".new")  # renamed to `where` once it is started: the commit
        shutil.rmtree(pending, ignore_errors=True)  # a start cut short (its wrapper gives up without running)
        pending.mkdir(parents=True)
        (pending / "rc.tmp").write_text(" " * 16)  # its exit code's room, taken now: a full disk cannot lose it
        with open(job.stdout, "ab") as out, open(job.stderr, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, str(_WRAPPER), str(where), *job.argv], cwd=job.workdir, env={**os.environ, **job.env},
                stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip
        (pending / "pid").write_text(f"{proc.pid}\n")
        pending.rename(where)
        return str(proc.pid)

    def check_active(self, jobs: Sequence[Job]) -> dict[str, JobState]:
        # a test's stand-in for a scheduler that does not answer: for its first looks, or from a look on
        if self._unreachable > 0 or self._answers == 0:
            self._unreachable -= 1
            raise ConnectionRefusedError("the stand-in scheduler is down")
        self._answers -= 1
        return {job.key: _state(_job_dir(job)) for job in jobs}

    def cancel_jobs(self, jobs: Sequence[Job]) -> None:
        for job in jobs:
            pid = _pid(_job_dir(job))
            if pid is not None and not (_job_dir(job) / "rc").exists():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGTERM)


def _job_dir(job: Job) -> Path:
    return Path(job.env["DAGFLOW_RUN_DIR"]) / "procjobs" / f"{job.node}.{job.attempt}"


def _pid(where: Path) -> int | None:
    try:
        return int((where / "pid").read_text())
    except (OSError, ValueError):
        return None


def _state(where: Path) -> JobState:
    if not where.is_dir():
        return JobState(UNKNOWN)
    try:
        return JobState(ENDED, rc=int((where / "rc").read_text()))
    except (OSError, ValueError):
        pass
    pid = _pid(where)
    if pid is None:  # not a job's directory
        return JobState(UNKNOWN)
    lost = JobState(ENDED, why="its wrapper died before it recorded an exit code")
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # a wrapper this driver started, reaped now: it died
            return lost
    except ChildProcessError:  # started by another driver
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return lost
    except PermissionError:
        pass
    return JobState(ACTIVE)
