"""How `dagflow cancel` stops a runner that runs on a thread of a bigger process (a search's trials): a signal
would reach the whole process, and stop the search and every other trial with it.

Such a runner makes a named pipe, `stop.fifo` in its run directory, and waits on its reading end with the rest
of its loop; `ask_stop` writes a byte to it, which is one stop request (a second is the runner's "kill at
once"). Opening the writing end without blocking fails while no runner reads it (ENXIO): that is how the
asker knows no such runner is there, and signals the lock's holder instead, as for a detached runner. The
runner removes the pipe as it ends; one a kill -9 left behind has no reader, so it is ignored, then replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

FILE = "stop.fifo"


class StopChannel:
    """The reading end, open as long as the runner runs (O_RDWR: it never sees end-of-file when an asker closes)."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / FILE
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # left by a runner that was killed
        os.mkfifo(self.path, 0o600)
        self.fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)

    def take(self) -> int:
        """How many stop requests arrived since the last take."""
        taken = 0
        with contextlib.suppress(BlockingIOError):
            while data := os.read(self.fd, 512):
                taken += len(data)
        return taken

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        os.close(self.fd)


def ask_stop(run_dir: Path) -> bool:
    """Ask the runner reading run_dir's stop channel to stop; False: no runner reads one."""
    try:
        fd = os.open(Path(run_dir) / FILE, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        if error.errno in (errno.ENXIO, errno.ENOENT, errno.EACCES):
            return False
        raise
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        os.write(fd, b"x")
    except BlockingIOError:  # 64 KiB of requests not read yet: the runner has plenty to act on
        pass
    finally:
        os.close(fd)
    return True
