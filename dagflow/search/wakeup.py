"""The scheduler's sleep between rounds: until a trial's runner ends, a stop, or the poll period.

A trial whose runner is a thread of the search process (trial_threads.py) wakes the wait itself as it ends.
A local trial run by a detached runner has ended when the runner the engine's launch started (runner.pid) exits:
it releases the run's lock as it goes. The wait holds a pidfd on each running trial's runner and wakes
the moment one becomes readable, so the next trial is suggested and submitted without waiting out a
poll period; the poll period is left for what only a look can see (a batch engine's jobs, a deadline,
early stopping's metric lines). A runner seen ended is not waited on again: its trial is recorded at
the next round; where its run does not read as ended yet (a runner that died before it took the lock,
within the start grace; a status that could not be read just then) it is looked at again after a short
delay that doubles up to the poll period, so a late end is still seen soon and nothing spins.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
from collections.abc import Iterable
from pathlib import Path

from dagflow.search.scheduler_observe import runner_pid, runs_its_trial

FIRST_RECHECK_S = 0.05  # the first look again at a run whose runner ended but that did not read as ended


class Wakeup:
    def __init__(self) -> None:
        # a socket pair rather than a pipe: a wake() once it is closed fails on the closed socket object,
        # never writes into whatever file reused a closed descriptor's number
        self._wake, self._waker = socket.socketpair()
        self._wake.setblocking(False)
        self._waker.setblocking(False)
        self._ended: dict[tuple[Path, int], float] = {}  # runner seen ended -> the delay of its next look
        self._pidfds = hasattr(os, "pidfd_open")  # Linux; without them a wait is the poll period

    def wake(self) -> None:
        """End the current wait, or the next one, at once (from a signal handler or another thread too)."""
        with contextlib.suppress(OSError):  # full (a wake is pending anyway) or closed
            self._waker.send(b"\0")

    def wait(self, run_dirs: Iterable[Path], timeout_s: float) -> None:
        """Sleep until a runner of these runs ends, wake() is called, or timeout_s passes."""
        pidfds: dict[int, tuple[Path, int]] = {}
        poll_s = timeout_s
        try:
            for run_dir in run_dirs if self._pidfds else ():
                pid = runner_pid(run_dir)
                if pid is None:
                    continue
                if (run_dir, pid) in self._ended:
                    delay = self._ended[(run_dir, pid)]
                    self._ended[(run_dir, pid)] = min(2 * delay, poll_s)
                    timeout_s = min(timeout_s, delay)
                    continue
                fd = self._open(run_dir, pid)
                if not self._pidfds:
                    break
                if fd is None:
                    return  # it ended since the round looked: the next round records it
                pidfds[fd] = (run_dir, pid)
            poller = select.poll()  # no FD_SETSIZE limit, unlike select.select
            for fd in (self._wake.fileno(), *pidfds):
                poller.register(fd, select.POLLIN)
            ready = poller.poll(max(0.0, timeout_s) * 1000)
            self._ended.update((pidfds[fd], FIRST_RECHECK_S) for fd, _ in ready if fd in pidfds)
            self._drain()
        finally:
            for fd in pidfds:
                os.close(fd)

    def _open(self, run_dir: Path, pid: int) -> int | None:
        """A pidfd on run_dir's runner pid; None when it has ended (now marked seen)."""
        try:
            fd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:
            fd = None
        except OSError:  # a kernel older than pidfds (Linux 5.3): poll from now on
            self._pidfds = False
            return None
        # checked once the pidfd holds the process: a pid reused before it was opened shows another command.
        # A child of this process still showing this process's command line is a runner its submit forked
        # that has not reached its exec yet: it is watched too, not taken for ended.
        if fd is not None and (_forked_not_exec(pid) or runs_its_trial(pid, run_dir)):
            return fd
        if fd is not None:
            os.close(fd)
        self._ended[(run_dir, pid)] = FIRST_RECHECK_S
        return None

    def _drain(self) -> None:
        try:
            while self._wake.recv(64):
                pass
        except OSError:  # empty
            pass


def _forked_not_exec(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    parent = int(stat[stat.rindex(")") + 2 :].split()[1])  # the fields after "(comm)": state, ppid, ...
    return parent == os.getpid() and command == Path("/proc/self/cmdline").read_bytes()
