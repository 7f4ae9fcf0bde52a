"""Trials run on threads of the search process, where the engine can run a run so (the local engine's
`launch_here`): a trial then costs what its nodes cost, not a Python and dagflow start-up for a detached
runner each.

Such a runner is the run's runner as a detached one is: it holds the run's lock while it drives the run (so
`dagflow status` and the live-run rule see it live), and its keeper outlives it. If the search process dies
(kill -9), its trials' runners die with it while their keepers run on: the next scheduler finds each such
run cut short, or prepared and never started, and launches it again, which adopts what its keeper ran.
A runner that ends calls `wake` (the scheduler's wakeup), so its end is heard at once. What stopped a runner
with an error (a full disk, a lost keeper) is kept for the scheduler and written to the run's runner.log, as
a detached runner's error would be.
"""

from __future__ import annotations

import contextlib
import threading
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dagflow.errors import DagflowError
from dagflow.run.layout import RunLayout


class Runner(Protocol):
    def run(self) -> object: ...

    def request_stop(self) -> None: ...


class TrialThreads:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._threads: dict[Path, tuple[threading.Thread, Runner]] = {}
        self._ended: set[Path] = set()  # runs whose runner returned: set before it wakes the scheduler
        self._errors: dict[Path, str] = {}

    def start(self, run_dir: Path, runner: Runner) -> None:
        # A daemon: a search that stops on an error leaves its trials' keepers running, as a kill would,
        # for the next scheduler to adopt, rather than waiting at exit for trials that may take hours.
        thread = threading.Thread(target=self._drive, args=(run_dir, runner), name=f"trial {run_dir.name}", daemon=True)
        self._errors.pop(run_dir, None)
        self._ended.discard(run_dir)
        self._threads[run_dir] = (thread, runner)
        thread.start()

    def running(self, run_dir: Path) -> bool:
        """Whether a runner of this process drives (or is about to drive) the run."""
        return run_dir in self._threads and run_dir not in self._ended

    def ours(self, run_dir: Path) -> bool:
        """Whether this process ran the run's last runner (its error, if any, is error())."""
        return run_dir in self._threads

    def error(self, run_dir: Path) -> str | None:
        """The last line of what stopped the run's runner, where it stopped with an error."""
        return self._errors.get(run_dir)

    def stop(self, run_dir: Path) -> bool:
        """Ask the run's runner to stop (its nodes get SIGTERM, then SIGKILL); False: no runner of ours runs it."""
        if not self.running(run_dir):
            return False
        self._threads[run_dir][1].request_stop()
        return True

    def stop_all(self) -> None:
        """A second request kills the nodes at once (the runner's rule)."""
        for run_dir, (_, runner) in list(self._threads.items()):
            if run_dir not in self._ended:
                runner.request_stop()

    def join(self) -> None:
        """Wait for every runner to end (after a stop: until their nodes have stopped)."""
        for thread, _ in list(self._threads.values()):
            thread.join()

    def _drive(self, run_dir: Path, runner: Runner) -> None:
        try:
            runner.run()
        except BaseException as error:  # the trial's end, told as a detached runner's log would tell it
            said = str(error).strip() or type(error).__name__
            self._errors[run_dir] = said.splitlines()[-1]
            told = said if isinstance(error, DagflowError) else traceback.format_exc().rstrip()
            with contextlib.suppress(OSError), open(RunLayout.from_run_dir(run_dir).runner_log_path, "a") as log:
                log.write(f"{told}\n")
        finally:
            self._ended.add(run_dir)
            self._wake()
