"""Trials run on threads of the search process, where the engine can run a run so (the local engine's
`launch_here`): a trial then costs what its nodes cost, not a Python and dagflow start-up for a detached
runner each.

Such a runner is the run's runner as a detached one is: it holds the run's lock while it drives the run (so
`dagflow status` and the live-run rule see it live), and its keeper outlives it. If the search process dies
(kill -9), its trials' runners die with it while their keepers run on: the next scheduler finds each such
run cut short, or prepared and never started, and launches it again, which adopts what its keeper ran.
`dagflow cancel` of a trial's run stops that trial's runner alone, through the run's stop channel
(engines/local/stop_channel.py): the trial ends failed (its run interrupted, as a detached runner's would be),
and the search goes on. Ctrl-C of the search stops the search and its trials (the same command continues it).

A trial has ended once its runner has journaled the run's `finish` (durably, with its cache entries and
usage): the runner says so to its reporter, which wakes the scheduler then, so the trial is recorded and the
next one suggested while the runner still shuts down (its keeper exits, the run's lock is released). What
stopped a runner with an error (a full disk, a lost keeper) is kept for the scheduler and written to the
run's runner.log, as a detached runner's error would be.
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
from dagflow.run.reporting import Reporter
from dagflow.run.result import RunResult


class Runner(Protocol):
    def run(self) -> object: ...

    def request_stop(self) -> None: ...


class _Finish(Reporter):
    def __init__(self, finished: Callable[[], None]) -> None:
        self._finished = finished

    def run_finished(self, result: RunResult) -> None:
        self._finished()


class TrialThreads:
    def __init__(self, wake: Callable[[], None]) -> None:
        self._wake = wake
        self._threads: dict[Path, tuple[threading.Thread, Runner]] = {}
        self._finished: set[Path] = set()  # runs whose runner has journaled their finish
        self._returned: set[Path] = set()  # runs whose runner's run() has returned (or raised)
        self._errors: dict[Path, str] = {}

    def start(self, run_dir: Path, launch: Callable[[Reporter], Runner]) -> None:
        """Run the runner launch(reporter) makes on a thread of its own."""
        runner = launch(_Finish(lambda: self._ended(run_dir, self._finished)))
        # A daemon: a search that stops on an error leaves its trials' keepers running, as a kill would,
        # for the next scheduler to adopt, rather than waiting at exit for trials that may take hours.
        thread = threading.Thread(target=self._drive, args=(run_dir, runner), name=f"trial {run_dir.name}", daemon=True)
        for marks in (self._finished, self._returned):
            marks.discard(run_dir)
        self._errors.pop(run_dir, None)
        self._threads[run_dir] = (thread, runner)
        thread.start()

    def ours(self, run_dir: Path) -> bool:
        """Whether a runner of this process runs, or ran, the run (its end wakes the scheduler itself)."""
        return run_dir in self._threads

    def running(self, run_dir: Path) -> bool:
        """Whether a runner of this process drives the run and it has not ended yet."""
        return self.ours(run_dir) and run_dir not in self._finished and run_dir not in self._returned

    def finished(self, run_dir: Path) -> bool:
        """Whether the run's end is journaled (its lock may still be held while its runner shuts down)."""
        return run_dir in self._finished

    def error(self, run_dir: Path) -> str | None:
        """The last line of what stopped the run's runner, where it stopped with an error."""
        return self._errors.get(run_dir)

    def stop(self, run_dir: Path) -> bool:
        """Ask the run's runner to stop (its nodes get SIGTERM, then SIGKILL); one that ended has nothing left
        to stop. False: no runner of this process holds the run (the engine's cancel is for it)."""
        if not self.ours(run_dir) or run_dir in self._returned:
            return False
        if run_dir not in self._finished:
            self._threads[run_dir][1].request_stop()
        return True

    def stop_all(self) -> None:
        """Ask every running runner to stop (a second request kills the nodes at once: the runner's rule)."""
        for run_dir in list(self._threads):
            if self.running(run_dir):
                self._threads[run_dir][1].request_stop()

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
            self._ended(run_dir, self._returned)

    def _ended(self, run_dir: Path, marks: set[Path]) -> None:
        marks.add(run_dir)  # before the wake: the round it starts sees the end
        self._wake()
