"""What a node used on Slurm and Grid Engine, measured by the node wrapper (node.py) inside its job.

The wrapper starts each attempt as its child and reaps it with wait4(2), as the local keeper does: wall
time from start to reap, CPU time (user + system) and ru_maxrss of the node's process, which include
the descendants it waited for (the largest one's resident set, not a sum; at least the wrapper's own
few MB, as the child starts as a vfork of it). It appends one record per attempt to the run's
usage.jsonl, which lives in the run directory the submit side shares with the execute hosts (on the
test clusters one file system; on a real cluster the run directory must be on a shared file system for
the journal already).

What the scheduler gave the job is read from the job's environment, which both set without an
accounting database: Slurm's SLURM_CPUS_ON_NODE, SLURM_MEM_PER_NODE or SLURM_MEM_PER_CPU and
SLURM_GPUS_ON_NODE; Grid Engine's NSLOTS. A record that cannot be written (a full disk) is left out:
the node's result matters more than its measurement.
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from dagflow.run.usage import REASON_KILLED, REASON_OOM, REASON_TIMEOUT, NodeUsage, oom_kills, record_usage

KB_PER_MB = 1024


@dataclass(frozen=True, slots=True)
class AttemptUsage:
    started: float  # unix seconds
    ended: float
    wall_s: float
    cpu_s: float
    maxrss_kb: int


class Stopwatch:
    """Started right before the attempt's process; `reaped(rusage)` when wait4 returned it."""

    def __init__(self) -> None:
        self.started = time.time()
        self._t0 = time.monotonic()

    def reaped(self, usage: resource.struct_rusage) -> AttemptUsage:
        wall = time.monotonic() - self._t0
        return AttemptUsage(self.started, time.time(), wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss)


def wait_measured(proc: subprocess.Popen[bytes], timeout_s: float | None) -> resource.struct_rusage | None:
    """Reap proc with wait4 and return its rusage; None when it still runs after timeout_s.

    A pidfd makes the timeout a plain wait, without polling; a stop signal's handler may raise out of it.
    """
    if timeout_s is not None:
        try:
            pidfd = os.pidfd_open(proc.pid)
        except ProcessLookupError:  # already reaped by someone else: nothing to measure
            return None
        try:
            ready, _, _ = select.select([pidfd], [], [], timeout_s)
        finally:
            os.close(pidfd)
        if not ready:
            return None
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    return usage


def scheduler() -> tuple[str, str | None, dict[str, float]]:
    """(engine, slot, what the scheduler allocated), from the job's environment (slot: Grid Engine's queue)."""
    env = os.environ
    if "SLURM_JOB_ID" in env:
        allocated: dict[str, float] = {}
        cpus = _int(env.get("SLURM_CPUS_ON_NODE"))
        if cpus is not None:
            allocated["cpus"] = cpus
        per_node = _int(env.get("SLURM_MEM_PER_NODE"))
        per_cpu = _int(env.get("SLURM_MEM_PER_CPU"))
        if per_node is not None:
            allocated["memory_mb"] = per_node
        elif per_cpu is not None and cpus is not None:
            allocated["memory_mb"] = per_cpu * cpus
        gpus = _int(env.get("SLURM_GPUS_ON_NODE"))
        if gpus is not None:
            allocated["gpus"] = gpus
        return "slurm", None, allocated
    if "SGE_ROOT" in env or "SGE_TASK_ID" in env:
        slots = _int(env.get("NSLOTS"))
        return "sge", env.get("QUEUE"), ({"cpus": slots} if slots is not None else {})
    return "batch", None, {}  # the wrapper run by hand, outside a scheduler


def reason_of(rc: int, timed_out: bool, stopped: bool, oom_before: int | None) -> str | None:
    if timed_out:
        return REASON_TIMEOUT
    if stopped:
        return REASON_KILLED
    if rc >= 0:
        return None
    if rc == -signal.SIGKILL:  # a SIGKILL the wrapper did not send: the OOM killer, if it counted one since
        after = oom_kills()
        if after is not None and oom_before is not None and after > oom_before:
            return REASON_OOM
    return REASON_KILLED


def record_attempt(
    run_dir: Path,
    node: str,
    step: str,
    attempt: int,
    requested: dict[str, float],
    measured: AttemptUsage | None,
    rc: int,
    reason: str | None,
    job: str,
) -> None:
    engine, slot, allocated = scheduler()
    extra: dict[str, float | str] = {"job": job} if job else {}
    if rc < 0:
        with contextlib.suppress(ValueError):
            extra["signal"] = signal.Signals(-rc).name
    usage = NodeUsage(
        node=node,
        step=step,
        attempt=attempt,
        engine=engine,
        started=None if measured is None else round(measured.started, 3),
        ended=None if measured is None else round(measured.ended, 3),
        wall_s=None if measured is None else round(measured.wall_s, 3),
        cpu_s=None if measured is None else round(measured.cpu_s, 3),
        peak_memory_mb=None if measured is None else round(measured.maxrss_kb / KB_PER_MB, 1),
        gpu_memory_peak_mb=None,
        gpu_utilization_pct=None,
        host=socket.gethostname(),
        slot=slot,
        requested=requested,
        allocated=allocated,
        exit_code=rc,
        reason=reason,
        extra=extra,
    )
    with contextlib.suppress(OSError):
        record_usage(run_dir, usage)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None
