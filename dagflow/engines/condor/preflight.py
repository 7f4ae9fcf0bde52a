"""Submissions a schedd accepts but never runs, refused before anything is queued.

- root: a schedd run as root refuses jobs owned by root; a personal HTCondor (every daemon run as one
  unprivileged user) queues them as its own user, which cannot write the run directory root created, so
  the schedd puts the DAGMan job in cool down again and again (its SchedLog: "errno 13").
- a run directory under /tmp: DAGMan exits at start, as its default node log would be in /tmp
  (condor_dagman's `DAGMAN_AVOID_SLASH_TMP` check, fatal under the default DAGMAN_USE_STRICT = 1; it
  tests the path's prefix, so `/tmpx` counts too). Where the pipeline file lives does not matter.
- a run directory the submitter cannot write: neither can the DAGMan job, which runs as the submitter.
"""

from __future__ import annotations

import os
from pathlib import Path

from dagflow.errors import DagflowError


class UnstartableError(DagflowError):
    """The schedd would take the DAGMan job but never run it."""


def writable_or_error(directory: Path) -> None:
    """Raise UnstartableError unless this user can create files in directory (or, where it does not exist
    yet, in its nearest existing parent)."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UnstartableError(
            f"cannot write {existing}: give a --runs-dir this user ({_user()}) can write"
        )


def unstartable_reasons(run_dir: Path) -> list[str]:
    """Why a DAGMan job for run_dir (absolute) would never run; empty when nothing is known to stop it."""
    reasons = []
    if os.geteuid() == 0:
        reasons.append(
            "HTCondor does not run jobs as root (a schedd run as root refuses them; a personal HTCondor "
            "cannot write what root wrote): submit as the user the jobs run as, e.g. "
            "`runuser -u USER -- dagflow submit ...`; `--dry-run` compiles without submitting"
        )
    if str(run_dir).startswith("/tmp"):
        reasons.append(
            f"run directory {run_dir} is under /tmp, where DAGMan refuses its node log and exits at start: "
            "give a --runs-dir elsewhere (e.g. under /var/tmp or your home)"
        )
    if os.geteuid() != 0 and not os.access(run_dir, os.W_OK | os.X_OK):
        reasons.append(f"cannot write {run_dir} as {_user()}, and neither could the DAGMan job")
    return reasons


def refuse_unstartable(run_dir: Path) -> None:
    reasons = unstartable_reasons(run_dir)
    if reasons:
        raise UnstartableError("not submitted: " + "; ".join(reasons))


def _user() -> str:
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"
