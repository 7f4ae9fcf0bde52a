"""`python wrap.py JOB_DIR ARGV...`: once the driver committed the job (executor.py), run ARGV, then write its
exit code to JOB_DIR/rc (as os.waitstatus_to_exitcode gives it: negative for a signal). SIGTERM to the job's
process group stops ARGV; the wrapper itself lives on to record how it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_COMMIT_WAIT_S = 30.0


def main() -> None:
    job_dir, argv = Path(sys.argv[1]), sys.argv[2:]
    signal.signal(signal.SIGTERM, lambda *_: None)  # a handler, not SIG_IGN: the child gets the default back
    if not _committed(job_dir):
        return  # the driver died (or its disk filled up) before the job was committed: it never ran
    try:
        rc = subprocess.call(argv)
    except OSError as error:
        print(f"cannot start {argv[0]!r}: {error.strerror}", file=sys.stderr)
        rc = 127
    with open(job_dir / "rc.tmp", "r+") as room:  # written in place: the room was taken before it started
        room.write(f"{rc}\n".ljust(16))
    os.replace(job_dir / "rc.tmp", job_dir / "rc")


def _committed(job_dir: Path) -> bool:
    """Whether the driver renamed the job's directory into place with this wrapper's pid in it."""
    deadline = time.monotonic() + _COMMIT_WAIT_S
    while time.monotonic() < deadline:
        try:
            return int((job_dir / "pid").read_text()) == os.getpid()
        except (OSError, ValueError):
            time.sleep(0.01)
    return False


if __name__ == "__main__":
    main()
