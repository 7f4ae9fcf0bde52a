"""The Slurm client commands dagflow uses (sbatch, squeue, scontrol, scancel), and their errors.

Every call goes through `run_slurm`, so a missing command or a controller that does not answer becomes
one SlurmUnreachableError (exit code 3) naming what was tried, never a traceback.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from dagflow.engines.batch.client import TIMEOUT_S, SchedulerClient
from dagflow.errors import EXIT_UNREACHABLE, DagflowError


class SlurmError(DagflowError):
    """Slurm answered, but refused what dagflow asked (a bad option, an unknown job)."""

    exit_code = 1


class SlurmUnreachableError(DagflowError):
    exit_code = EXIT_UNREACHABLE


def _where() -> str:
    conf = os.environ.get("SLURM_CONF")
    return f"SLURM_CONF={conf}" if conf else "the default configuration (set SLURM_CONF to choose another)"


_UNREACHABLE = re.compile(
    r"(unable to contact|connection refused|communication connection failure|socket timed out|"
    r"could not open configuration|unable to process configuration|unable to establish|"
    r"zero bytes were transmitted|munge)",
    re.IGNORECASE,
)


_CLIENT = SchedulerClient("Slurm", _where, _UNREACHABLE, SlurmUnreachableError, SlurmError)


def run_slurm(argv: Sequence[str], input_text: str | None = None, timeout_s: float = TIMEOUT_S) -> str:
    """Run a Slurm client command and return its stdout; raise SlurmUnreachableError or SlurmError."""
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):  # Slurm itself would retry reading it for a minute
        raise SlurmUnreachableError(f"no Slurm reachable: SLURM_CONF={conf} is not a file")
    return _CLIENT.run(argv, input_text, timeout_s)


def sbatch(options: Sequence[str], script: str) -> str:
    """Submit a batch script; return the job id."""
    out = run_slurm(["sbatch", "--parsable", *options, script]).strip()
    job_id = out.split(";", 1)[0]  # --parsable prints "id" or "id;cluster"
    if not job_id.isdigit():
        raise SlurmError(f"sbatch printed {out!r}, not a job id")
    return job_id


def scancel(job_ids: Sequence[str]) -> None:
    for start in range(0, len(job_ids), 500):  # keep the command line short
        run_slurm(["scancel", *job_ids[start : start + 500]])


def max_array_size() -> int:
    """MaxArraySize from the controller: an array's task ids must be below it."""
    out = run_slurm(["scontrol", "show", "config"])
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.MULTILINE)
    return int(match.group(1)) if match else 1001


@dataclass(frozen=True, slots=True)
class QueuedJob:
    job_id: str  # the array's job id for an array task
    task: int | None  # array task id, or None for a plain job
    state: str  # PENDING, RUNNING, COMPLETING, ...
    reason: str = ""  # why a pending job waits: Dependency, Resources, Priority, JobHeldUser, ...


# States of jobs that ended (squeue lists some of them for a moment).
FINISHED_STATES = frozenset(
    {"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY"}
)


def _task_ids(spec: str) -> Iterator[int]:
    """ "0-3,7,9-11%4" -> 0 1 2 3 7 9 10 11 (the %N throttle is not a task)."""
    for part in spec.split("%", 1)[0].split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        step = 1
        if ":" in last:
            last, step_text = last.split(":", 1)
            step = int(step_text)
        yield from range(int(first), int(last or first) + 1, step)


def queued_jobs() -> list[QueuedJob]:
    """This user's jobs that Slurm still holds (pending, running, completing), one entry per array task.

    `squeue --noheader --array --format`, not `squeue --json`: Slurm 22.05's --json ignores every filter
    and dumps all jobs of all users, including those finished in the last MinJobAge seconds. Measured
    here during the 4,921-node benchmark: 24 MB and 1.3-1.7 s per call (--json) against 0.06 s (text).
    """
    out = run_slurm(["squeue", "--noheader", "--array", "--format=%i %T %r", f"--user={os.getuid()}"])
    result = []
    for line in out.splitlines():
        ref, state, reason = ([*line.split(None, 2), "", ""])[:3]
        if not ref or state in FINISHED_STATES:
            continue
        job, _, task = ref.partition("_")
        if task.isdigit():
            result.append(QueuedJob(job, int(task), state, reason))
        elif task:  # an unexpanded range ("123_[4-7]"), should --array ever not expand it
            result.extend(QueuedJob(job, t, state, reason) for t in _task_ids(task.strip("[]")))
        else:
            result.append(QueuedJob(job, None, state, reason))
    return result


def job_states(job_refs: Sequence[str]) -> dict[str, tuple[str, str]]:
    """`scontrol show job` for finished jobs ("123" or "123_4"): ref -> (JobState, ExitCode).

    Without slurmdbd there is no sacct; scontrol keeps a finished job for MinJobAge seconds, and a job
    it has forgotten is simply missing from the result.
    """
    result: dict[str, tuple[str, str]] = {}
    for ref in job_refs:
        try:
            out = run_slurm(["scontrol", "show", "job", "--oneliner", ref])
        except SlurmError:  # "Invalid job id specified": long gone
            continue
        state = re.search(r"\bJobState=(\S+)", out)
        code = re.search(r"\bExitCode=(\S+)", out)
        if state:
            result[ref] = (state.group(1), code.group(1) if code else "")
    return result
