"""The files Spearmint itself leaves in an experiment directory, kept the same way by a dagflow search, for
the scripts and habits of its users (HIPS/Spearmint main.py and launcher.py; JasperSnoek/spearmint):

- `output/NNNNNNNN.out`: a job's stdout and stderr, the id zero-padded to 8 digits (written by the job:
  spearmint_job.py, `captured_output`).
- `best_job_and_result.txt`: rewritten after each trial ends, once a best exists:
      Best result: 0.397887
      Job-id: 12
      Parameters:
      x: [2.5]
  ("Parameters: " ends with a space, as Spearmint writes it), a line `name: value` per variable. The
  best is the one the search reports everywhere (feasible; the lowest posterior mean where the objective
  is GAUSSIAN).
- `trace.csv`: a line appended after each trial ends, HIPS's columns: unix time, best value, best job id,
  jobs pending, jobs broken, jobs complete (`nan,-1` for the best while there is none).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from dagflow.files import write_atomic
from dagflow.search.store import FAILED, IN_FLIGHT, SUCCEEDED, Trial

BEST_FILE = "best_job_and_result.txt"
TRACE_FILE = "trace.csv"


def output_path(directory: Path, job_id: int) -> Path:
    return directory / "output" / f"{job_id:08d}.out"


def write_records(directory: Path, trials: Sequence[Trial], best: Trial | None) -> None:
    """best_job_and_result.txt (once there is a best) and a line of trace.csv, after a trial ended."""
    if best is not None and best.value is not None:
        lines = [f"Best result: {best.value:f}", f"Job-id: {best.number}", "Parameters: "]
        lines += [f"{name}: {_shown(value)}" for name, value in best.params.items()]
        write_atomic(directory / BEST_FILE, ("\n".join(lines) + "\n").encode("utf-8"))
    value = best.value if best is not None and best.value is not None else math.nan
    job = best.number if best is not None else -1
    pending = sum(1 for trial in trials if trial.state in IN_FLIGHT)
    broken = sum(1 for trial in trials if trial.state == FAILED)
    complete = sum(1 for trial in trials if trial.state == SUCCEEDED)
    with open(directory / TRACE_FILE, "a", encoding="utf-8") as trace:
        trace.write(f"{int(time.time())},{value:f},{job},{pending},{broken},{complete}\n")


def _shown(value: Any) -> str:
    values = value if isinstance(value, list) else [value]
    return "[" + ", ".join(json.dumps(item) if isinstance(item, str) else str(item) for item in values) + "]"


@contextlib.contextmanager
def captured_output(path: Path) -> Iterator[None]:
    """Send this process's stdout and stderr (and its children's) to path while the job runs, as
    Spearmint's launcher does; then copy what was written to the real stdout too, so that the run's own
    log (`dagflow logs`) holds it as well."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.dup2(out, 1)
        os.dup2(out, 2)
        yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, out):
            os.close(fd)
        with contextlib.suppress(OSError), open(path, "rb") as written:
            while chunk := written.read(1 << 16):
                sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
