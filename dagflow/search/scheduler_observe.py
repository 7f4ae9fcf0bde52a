"""How a trial's run is doing, read from its run directory the way its engine writes it.

The run directory is the one truth every engine keeps (dagflow.engines.registry.read_run_status reads
local, Slurm and HTCondor runs alike). On top of the run state this adds the liveness rule that
keeps a search from waiting forever on a trial (Spearmint's wedge, HIPS/Spearmint#25):

- running: the engine says so (a local runner holds the run's lock; Slurm/DAGMan still hold jobs),
  or the local runner process that submit started is alive but has not taken the lock yet;
- vanished: the run was started but its runner is gone without finishing it ("stopped"), or it was
  never started and nothing is starting it after `start_grace_s`, or its run directory is gone;
- cut short: vanished with its runner stopped without finishing (its finished nodes are journaled, and
  a resume goes on from them); `for_storage` when the runner said it stopped for a full disk.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.registry import read_run_status
from dagflow.errors import DagflowError
from dagflow.run.journal import FAILED
from dagflow.run.layout import RunLayout
from dagflow.run.status import RUN_NOT_STARTED, RUN_RUNNING, RUN_STOPPED, RunStatus

PENDING = "pending"  # nothing started yet, within the start grace
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED_RUN = "failed"
VANISHED = "vanished"
NOT_STARTED = "not-started"  # prepared, never started, nothing starting it: submit it again
CUT_SHORT = "cut-short"  # started, its runner gone, the run unfinished: a resume goes on from its journal
# what a runner that stopped for a full disk says last (engines/local/runner.py RunStorageError)
_STORAGE = tuple(os.strerror(code) for code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG))


@dataclass(frozen=True, slots=True)
class Observed:
    state: str
    why: str | None = None

    @property
    def for_storage(self) -> bool:
        return self.state == CUT_SHORT and any(words in (self.why or "") for words in _STORAGE)


def runner_pid(run_dir: Path) -> int | None:
    """The pid the local engine's submit recorded for this run's runner, if it recorded one."""
    try:
        return int(RunLayout.from_run_dir(run_dir).runner_pid_path.read_text().strip())
    except (OSError, ValueError):
        return None


def runner_alive(run_dir: Path) -> bool:
    """Whether the process the local engine's submit started for this run is alive (it writes
    runner.pid at once and takes the run's lock a moment later)."""
    pid = runner_pid(run_dir)
    return pid is not None and runs_its_trial(pid, run_dir)


def runs_its_trial(pid: int, run_dir: Path) -> bool:
    """Whether process pid is alive and is run_dir's runner: a reused pid belongs to some other program,
    and a runner's command line names its run (an exited one, a zombie, has none)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return run_dir.name.encode() in cmdline.split(b"\0")


def observe_run(
    run_dir: Path, since: float, start_grace_s: float, runner_said: str | None = None, settled: bool = False
) -> Observed:
    """The state of the trial run in run_dir, submitted at wall time `since`; runner_said: what stopped its
    runner, where the caller knows (else the runner's log says); settled: the caller heard its runner journal
    the run's finish, which holds while that runner still shuts down (and holds the run's lock)."""
    layout = RunLayout.from_run_dir(run_dir)
    young = time.time() - since < start_grace_s
    if not layout.exists():
        return Observed(PENDING) if young else Observed(VANISHED, f"its run directory {run_dir} is gone")
    try:
        status = read_run_status(layout, ingest=True)  # the scheduler waits on its trials: it ingests them
    except DagflowError as error:  # a batch system not answering now: ask again next time
        return Observed(RUNNING, str(error))
    state = status.journal.finished if settled and status.journal.finished else status.state
    if state == RUN_RUNNING or (not settled and runner_alive(layout.run_dir)):
        return Observed(RUNNING)
    if state == SUCCEEDED:
        return Observed(SUCCEEDED)
    if state == RUN_STOPPED:
        return Observed(CUT_SHORT, f"its runner stopped without finishing ({runner_said or _runner_tail(layout)})")
    if state == RUN_NOT_STARTED:
        if young:
            return Observed(PENDING)
        return Observed(NOT_STARTED, f"it never started ({runner_said or _runner_tail(layout)})")
    return Observed(FAILED_RUN, failure_of(status, state))


def never_started(run_dir: Path) -> bool:
    """Whether a prepared run shows no sign of work: nothing running it, no node ever started or
    skipped. Such a run can be submitted again (what a failed or cut-off submission leaves behind)."""
    try:
        status = read_run_status(RunLayout.from_run_dir(run_dir), ingest=True)  # a batch engine's start, ingested
    except DagflowError:
        return False
    if status.state == RUN_RUNNING or runner_alive(run_dir):
        return False
    return not status.journal.nodes


def failure_of(status: RunStatus, state: str | None = None) -> str:
    """One line: the run's state (state: as its runner journaled it, where that is known before the status says
    so) and its first failed node, with the node's reason."""
    states = status.node_states()
    failed = [name for name, node_state in states.items() if node_state == FAILED]
    if not failed:
        return f"run {state or status.state}"
    record = status.record(failed[0])
    why = record.why or (f"exit {record.rc}" if record.rc is not None else "failed")
    tail = status.stderr_tail(failed[0], lines=1)
    return f"{failed[0]} {why}" + (f": {tail[-1].strip()}" if tail else "")


def _runner_tail(layout: RunLayout) -> str:
    try:
        lines = layout.runner_log_path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return "no runner log"
    return lines[-1] if lines else "its runner printed nothing"
