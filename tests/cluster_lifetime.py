"""Who starts and stops the test clusters when pytest runs as several processes (pytest-xdist `-n`).

A fixture brings its cluster up under an exclusive lock, so two workers never run `up` at once. If it was
the one that started the cluster, it does not stop it at its own end (another worker may still be using
it) but leaves a mark; the main pytest process stops every cluster marked in its session once all
workers have finished (conftest.py's pytest_sessionfinish). A cluster that was already up (CI starts them
in `.ci/run`) is never marked, so whoever started it stops it.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

STATE = Path("/tmp/dagflow-test-clusters")
SESSION_VARIABLE = "DAGFLOW_TEST_SESSION"  # set by the main process; xdist workers inherit it


def begin_session() -> None:
    os.environ.setdefault(SESSION_VARIABLE, uuid.uuid4().hex)


@contextmanager
def cluster_lock(name: str) -> Iterator[None]:
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / f"{name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@contextmanager
def cluster_use(name: str, exclusive: bool) -> Iterator[None]:
    """Hold the cluster for one test: shared by ordinary tests, exclusive for one that disrupts every job on
    it (a drain of the pool's only machine evicts the other workers' jobs too). The exclusive user first
    takes the turnstile, so a stream of shared users cannot starve it: new shared users queue behind it."""
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / f"{name}.turnstile", "a") as turnstile, open(STATE / f"{name}.use", "a") as use:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(use, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield


def bring_up(name: str, script: Path, is_up: Callable[[], bool], up: Callable[[], subprocess.CompletedProcess[str]]
             ) -> subprocess.CompletedProcess[str] | None:
    """Run `up` unless the cluster runs (None then); mark it for stopping at the session's end if it started."""
    with cluster_lock(name):
        if is_up():
            return None
        done = up()
        if done.returncode == 0:
            (STATE / f"{name}.{os.environ[SESSION_VARIABLE]}").write_text(str(script))
        return done


def stop_started() -> None:
    """In the main process at the session's end: `down` for each cluster this session started."""
    session = os.environ.get(SESSION_VARIABLE)
    if session is None or not STATE.is_dir():
        return
    for mark in STATE.glob(f"*.{session}"):
        subprocess.run([mark.read_text(), "down"], capture_output=True, check=False)
        mark.unlink(missing_ok=True)
