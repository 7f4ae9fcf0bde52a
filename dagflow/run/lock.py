"""One runner per run directory, enforced with flock(2) so a killed runner releases it at once.

Whether a runner holds a run is asked by taking a shared lock for an instant (is_locked): flock has no query.
A runner that starts in that instant finds the lock busy, so it tries again for a while (_PROBE_GRACE_S)
before it refuses: a probe lets go within microseconds, a live runner never does. Without that grace, a
`dagflow status` (or the live-run check of another run) that looks at a run as its runner starts fails the run.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from dagflow.errors import DagflowError

# How long a runner retries a busy lock before it refuses: far longer than a probe holds it, even on a loaded
# machine, and short enough for a refusal to come quickly.
_PROBE_GRACE_S = 2.0


class RunLockedError(DagflowError):
    pass


class RunLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock_within(fd, _PROBE_GRACE_S):
            os.close(fd)
            raise RunLockedError(
                f"run {self.path.parent.name} is being run by another runner (pid {holder_pid(self.path)})"
            )
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
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


def holder_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
