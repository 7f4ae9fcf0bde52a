"""The run lock against its probes: `is_locked` takes a shared lock for an instant (flock has no query), so
a runner that starts in that instant must wait the probe out, not refuse its own run; a live runner's lock
is still refused."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

from dagflow.run import lock
from dagflow.run.lock import RunLock, RunLockedError, is_locked


def test_a_runner_that_starts_while_a_probe_holds_the_lock_waits_it_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What failed a search's trial at random (its runner started on a thread while the scheduler's
    live-run check probed the run): the probe's shared lock made the runner's exclusive one refuse."""
    monkeypatch.setattr(lock, "_PROBE_GRACE_S", 60.0)  # far past the probe below, however loaded the machine
    path = tmp_path / "lock"
    path.touch()
    probe = os.open(path, os.O_RDONLY)
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a probe, caught mid-way
    runner = RunLock(path)
    errors: list[BaseException] = []

    def start() -> None:
        try:
            runner.acquire()
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=start)
    thread.start()
    thread.join(0.2)  # it is waiting, or it refused already
    os.close(probe)  # the probe ends
    thread.join()
    assert errors == []
    assert is_locked(path) and path.read_text().strip() == f"{os.getpid()} driver"
    runner.release()
    assert not is_locked(path)


def test_a_live_runners_lock_is_still_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock, "_PROBE_GRACE_S", 0.05)
    path = tmp_path / "lock"
    first = RunLock(path)
    first.acquire()
    with pytest.raises(RunLockedError, match=rf"being run by another runner \(pid {os.getpid()}\)"):
        RunLock(path).acquire()
    first.release()
    RunLock(path).acquire()
