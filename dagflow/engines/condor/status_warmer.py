"""Ingests a condor run when its DAG ends: a detached process that `dagflow submit` (and resubmit, and
each search trial) leaves beside the DAGMan job it submits.

It ingests the run once as it starts, so that what reads the run directory without ingesting it
(`dagflow runs`) sees the submission running, then follows the DAGMan job's own event log with
htcondor2.JobEventLog, as condor_wait does, until that job terminates or is removed, and ingests the run
again (ingest.py): that records the nodes' usage
(usage.jsonl), journals them and records what DAGMan's files say beside the journal (run/observed.py).
The first status a user asks for after the DAG ended then reads the run directory only
(benchmarks/status.py times both). A status asked for while it works waits for its ingest, then reads.

Nothing depends on it: it stops, doing nothing, when the run directory is gone, when a newer submission
of the run (a resubmit) has its own, and when `dagflow cancel` recorded the removal of a job whose log
may never say so. A kill at any moment leaves the journal and the observed record as their writers leave
them (appended whole; replaced by a rename), and usage.jsonl as its one locked writer leaves it. Its
errors go to condor/status-warmer.log.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from dagflow.data import with_import_root
from dagflow.engines.condor.records import CondorRecord, Submission, condor_dir
from dagflow.errors import DagflowError

LOG_FILE = "status-warmer.log"
FOLLOW_S = 30.0  # one wait on the DAGMan job's log, after which the run directory is looked at again


def spawn(run_dir: Path, cluster: int) -> None:
    """Start the warmer of DAGMan job `cluster`, detached (its own session: a Ctrl-C of the submitting
    command does not reach it). Best effort: a warmer that cannot start leaves status as it was."""
    env = dict(os.environ)
    env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
    argv = [sys.executable, "-m", "dagflow.engines.condor.status_warmer", str(run_dir.absolute()), str(cluster)]
    try:
        with open(condor_dir(run_dir) / LOG_FILE, "ab") as log:
            subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env)
    except OSError:
        pass


def _latest(run_dir: Path) -> tuple[CondorRecord, Submission] | None:
    record = CondorRecord.load(run_dir) if run_dir.is_dir() else None
    latest = record.latest if record is not None else None
    return None if record is None or latest is None else (record, latest)


def wait_for_end(run_dir: Path, cluster: int, follow_s: float = FOLLOW_S) -> bool:
    """Wait until DAGMan job `cluster` terminated or was removed (True), or the run stopped being this
    warmer's to keep: its directory gone, or a newer submission the latest (False)."""
    import htcondor2

    log = None
    while True:
        found = _latest(run_dir)
        if found is None or found[1].cluster != cluster:
            return False
        record, latest = found
        if latest.removed is not None:  # cancelled: the schedd may never log it for a job that never started
            return True
        if log is None and record.dagman_log.is_file():
            log = htcondor2.JobEventLog(str(record.dagman_log))
        if log is None:
            time.sleep(follow_s)
            continue
        ended = (htcondor2.JobEventType.JOB_TERMINATED, htcondor2.JobEventType.JOB_ABORTED)
        for event in log.events(stop_after=int(follow_s)):
            if event.cluster == cluster and event.type in ended:
                return True


def warm(run_dir: Path) -> None:
    """Ingest the ended run (ingest.py). (Imported here: a warmer
    waits for hours holding only what waiting needs.)"""
    from dagflow.engines.condor.ingest import ingest_condor
    from dagflow.run.layout import RunLayout

    ingest_condor(RunLayout.from_run_dir(run_dir))


def main(argv: list[str]) -> int:
    run_dir, cluster = Path(argv[0]), int(argv[1])
    try:
        found = _latest(run_dir)
        if found is not None and found[1].cluster == cluster:
            with contextlib.suppress(DagflowError):  # not a whole run (yet): nothing to show running
                warm(run_dir)
        if wait_for_end(run_dir, cluster):
            warm(run_dir)
    except Exception:  # report and go: the next status ingests the files itself
        if run_dir.is_dir():
            traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
