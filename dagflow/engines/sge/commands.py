"""The Grid Engine client commands dagflow uses (qsub, qstat, qdel, qconf), and their errors.

Every call goes through `run_sge`, so a missing command or a qmaster that does not answer becomes one
SgeUnreachableError (exit code 3) naming what was tried, never a traceback.
"""

from __future__ import annotations

import getpass
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dagflow.engines.batch.client import TIMEOUT_S, SchedulerClient
from dagflow.errors import EXIT_UNREACHABLE, DagflowError

DEFAULT_MAX_ARRAY = 75000  # Grid Engine's default max_aj_tasks


class SgeError(DagflowError):
    """Grid Engine answered, but refused what dagflow asked (a bad option, an unknown job)."""

    exit_code = 1


class SgeUnreachableError(DagflowError):
    exit_code = EXIT_UNREACHABLE


def _where() -> str:
    root, cell = os.environ.get("SGE_ROOT"), os.environ.get("SGE_CELL", "default")
    if not root:
        return "no SGE_ROOT set (eval the cluster's settings.sh, or `scripts/sge-cluster.sh env`)"
    port = os.environ.get("SGE_QMASTER_PORT")
    return f"SGE_ROOT={root} SGE_CELL={cell}" + (f" SGE_QMASTER_PORT={port}" if port else "")


_UNREACHABLE = re.compile(
    r"(commlib error|unable to (send message to|contact) qmaster|can't (find|read|open) .*act_qmaster|"
    r"SGE_ROOT|cell directory|connection refused|no route to host)",
    re.IGNORECASE,
)


# qsub and qconf say some refusals on stdout.
_CLIENT = SchedulerClient("Grid Engine", _where, _UNREACHABLE, SgeUnreachableError, SgeError, stdout_in_errors=True)


def run_sge(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> str:
    """Run a Grid Engine client command and return its stdout; raise SgeUnreachableError or SgeError."""
    return _CLIENT.run(argv, timeout_s=timeout_s)


def qsub(options: Sequence[str], script: str) -> str:
    """Submit a job script; return the job number (an array's too: -terse prints "23.1-4:1")."""
    out = run_sge(["qsub", "-terse", *options, script]).strip()
    job = out.split(".", 1)[0]
    if not job.isdigit():
        raise SgeError(f"qsub printed {out!r}, not a job number")
    return job


def qdel(jobs: Sequence[str]) -> None:
    """Delete jobs; those Grid Engine no longer knows (they ended) are not an error."""
    for start in range(0, len(jobs), 500):  # keep the command line short
        try:
            run_sge(["qdel", *jobs[start : start + 500]])
        except SgeError as error:
            if "does not exist" not in str(error):
                raise


def max_array_size() -> int:
    """max_aj_tasks from the global configuration (0 means no limit); also a first contact with qmaster."""
    out = run_sge(["qconf", "-sconf"])
    match = re.search(r"^max_aj_tasks\s+(\d+)", out, re.MULTILINE)
    size = int(match.group(1)) if match else DEFAULT_MAX_ARRAY
    return size or DEFAULT_MAX_ARRAY


@dataclass(frozen=True, slots=True)
class QueuedJob:
    job_id: str
    task: int | None  # array task id, or None for a plain job
    state: str  # Grid Engine's state letters: qw, hqw, r, t, Eqw, dr, ...


def _task_ids(spec: str) -> Iterator[int]:
    """ "1-7:2,9" -> 1 3 5 7 9."""
    for part in spec.split(","):
        if not part:
            continue
        span, _, step = part.partition(":")
        first, _, last = span.partition("-")
        yield from range(int(first), int(last or first) + 1, int(step or 1))


def parse_qstat(xml_text: str) -> list[QueuedJob]:
    """Jobs (one entry per array task) in `qstat -xml -g d` output."""
    jobs = []
    for entry in ET.fromstring(xml_text).iter("job_list"):
        number, state, tasks = entry.findtext("JB_job_number"), entry.findtext("state") or "", entry.findtext("tasks")
        if not number:
            continue
        if tasks:
            jobs.extend(QueuedJob(number, task, state) for task in _task_ids(tasks))
        else:
            jobs.append(QueuedJob(number, None, state))
    return jobs


def queued_jobs() -> list[QueuedJob]:
    """This user's jobs that Grid Engine still holds (waiting, running, in error state)."""
    return parse_qstat(run_sge(["qstat", "-xml", "-g", "d", "-u", getpass.getuser()]))
