"""`python wrap.py JOB_DIR ARGV...`: run ARGV, then write its exit code to JOB_DIR/rc (as
os.waitstatus_to_exitcode gives it: negative for a signal). SIGTERM to the job's process group stops ARGV;
the wrapper itself lives on to record how it ended."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


def main() -> None:
    job_dir, argv = Path(sys.argv[1]), sys.argv[2:]
    signal.signal(signal.SIGTERM, lambda *_: None)  # a handler, not SIG_IGN: the child gets the default back
    try:
        rc = subprocess.call(argv)
    except OSError as error:
        print(f"cannot start {argv[0]!r}: {error.strerror}", file=sys.stderr)
        rc = 127
    (job_dir / "rc.tmp").write_text(f"{rc}\n")
    os.replace(job_dir / "rc.tmp", job_dir / "rc")


if __name__ == "__main__":
    main()
