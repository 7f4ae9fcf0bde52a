"""One runner per run directory, enforced with flock(2) so a killed runner releases it at once.

Whether a runner holds a run is asked by taking a shared lock for an instant (is_locked): flock has no query.
A runner that starts in that instant finds the lock busy, so it tries again for a while (_PROBE_GRACE_S)
before it refuses: a probe lets go within microseconds, a live runner never does. Without that grace, a
`dagflow status` (or the live-run check of another run) that looks at a run as its runner starts fails the run.

The lock file names its holder, "pid role": the run's driver (DRIVER), or a `dagflow cancel` stopping what a
dead driver left (CANCEL, stop_driven below). A file of a bare pid, as earlier versions wrote, is a driver's.
"""

from __future__ import annotations

import fcntl
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dagflow.errors import DagflowError

# How long a runner retries a busy lock before it refuses: far longer than a probe holds it, even on a loaded
# machine, and short enough for a refusal to come quickly.
_PROBE_GRACE_S = 2.0
DRIVER = "driver"
CANCEL = "cancel"
T = TypeVar("T")


class RunLockedError(DagflowError):
    pass


class RunLock:
    def __init__(self, path: Path, role: str = DRIVER) -> None:
        self.path = path
        self.role = role
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock_within(fd, _PROBE_GRACE_S):
            os.close(fd)
            pid, role = holder(self.path) or (None, DRIVER)
            doing = "cancelled by `dagflow cancel`" if role == CANCEL else "being run by another runner"
            raise RunLockedError(f"run {self.path.parent.name} is {doing} (pid {pid})")
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {self.role}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _lock_within(fd: int, grace_s: float) -> bool:
    """Take fd's exclusive lock, trying again until grace_s has passed while it is busy."""
    deadline = time.monotonic() + grace_s
    pause = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def is_locked(path: Path) -> bool:
    """Whether a live runner holds the lock (a shared lock cannot be had beside its exclusive one)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def holder(path: Path) -> tuple[int, str] | None:
    """(pid, role) of the lock's holder, as its file says; None when it says nothing (never held, being written)."""
    try:
        pid, _, role = path.read_text().strip().partition(" ")
        return int(pid), role or DRIVER
    except (OSError, ValueError):
        return None


def stop_driven(path: Path, stop_left: Callable[[], T], stop_driver: Callable[[int], None]) -> T | None:
    """`dagflow cancel` of a run whose driver runs on this machine (the local runner, a job executor's driver):
    a driver that holds the run's lock (`path`) is asked to stop (`stop_driver(pid)`; it stops its nodes and
    journals them: None). Without one, what a dead driver left is stopped (`stop_left()`, its answer returned)
    holding the lock as CANCEL, so that no driver starts meanwhile. A cancel that finds another one holding it
    waits for that one to end, then looks again: it is never signalled as if it drove the run."""
    said = False
    while True:
        if not is_locked(path):
            lock = RunLock(path, role=CANCEL)
            try:
                lock.acquire()
            except RunLockedError:
                continue  # taken meanwhile (a driver starting, another cancel): look again
            try:
                return stop_left()
            finally:
                lock.release()
        found = holder(path)
        if found is not None and found[1] != CANCEL:
            stop_driver(found[0])
            return None
        if found is not None and not said:
            print(f"dagflow: another `dagflow cancel` (pid {found[0]}) stops run {path.parent.name}: waiting for it",
                  file=sys.stderr)  # fmt: skip
            said = True
        time.sleep(0.2)
