"""Why a submitted DAGMan job has not started, asked of the schedd.

DAGMan's own files say nothing until DAGMan runs. A scheduler-universe job the schedd fails to start (it
cannot open the job's output files as the job's owner, say) is put in "cool down" (NumJobCoolDowns,
JobCoolDownExpiration, SCHEDULER_UNIVERSE_COOL_DOWN_DURATION: 5 minutes by default) and stays idle;
the reason is only in the schedd's log, which is read when it is this machine's and readable.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from dagflow.engines.condor.records import CondorRecord
from dagflow.engines.condor.schedd import ScheddTarget, job_ad

_IDLE, _HELD = 1, 5
_PROJECTION = ["JobStatus", "NumJobCoolDowns", "JobCoolDownExpiration", "HoldReason"]
_LOG_TAIL = 256 * 1024
_LOG_PREFIX = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? (?:\(pid:\d+\) )?")
_ERRNO = re.compile(r"errno (\d+)")
_LINES_SHOWN = 2


def not_started_reason(record: CondorRecord, cluster: int) -> str | None:
    """One line on why DAGMan job `cluster` is not running, or None when the schedd gives no reason."""
    target = ScheddTarget(record.schedd, record.pool)
    ad = job_ad(target, cluster, _PROJECTION)
    if not ad:
        return None
    if ad.get("JobStatus") == _HELD:
        return f"held: {ad.get('HoldReason') or 'no HoldReason'}"
    tries = ad.get("NumJobCoolDowns")
    if ad.get("JobStatus") != _IDLE or not isinstance(tries, int) or tries < 1:
        return None
    line = f"idle: the schedd could not start it ({tries} time(s){_next_try(ad.get('JobCoolDownExpiration'))})"
    errors = schedd_log_errors(Path(record.dag).parent) if target == ScheddTarget() else []
    return line + (": " + "; ".join(errors) if errors else "; the schedd's log (SCHEDD_LOG) says why")


def _next_try(expiration: object) -> str:
    if not isinstance(expiration, int):
        return ""
    return f"; it tries again at {time.strftime('%H:%M:%S', time.localtime(expiration))}"


def schedd_log_errors(directory: Path) -> list[str]:
    """The local schedd's latest log lines about files in directory that it failed on, errno spelled out."""
    import htcondor2

    path = htcondor2.param.get("SCHEDD_LOG")
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - _LOG_TAIL))
            tail = handle.read().decode("utf-8", "replace")
    except OSError:
        return []
    found: list[str] = []
    for line in tail.splitlines():
        if str(directory) in line and "failed" in line:
            text = _ERRNO.sub(_spelled_errno, _LOG_PREFIX.sub("", line))
            if text not in found:
                found.append(text)
    return found[-_LINES_SHOWN:]


def _spelled_errno(match: re.Match[str]) -> str:
    return f"errno {match.group(1)} ({os.strerror(int(match.group(1)))})"
