"""dagflow's DAG scheduler for job executors: it drives a run to its end by starting each ready node as a job
(executor.py) and looking at the active ones every `poll_s`.

Each turn: start ready nodes (highest step priority first, up to `--jobs`, else the executor's `max_active`),
cancel attempts past their step's timeout, ask the executor about the active jobs, and record what ended: its end
event (succeeded, retry, checkpointed, failed, interrupted) durably in the journal, its cache entry, its
children released or blocked. The driver holds the run's lock for its whole life, as the local runner does,
so status and the live-run rule see it; its journal events are written once per turn.

A driver that starts on a run adopts what an earlier one left: for every node the journal does not show
finished, the executor is asked about its journaled attempt and the next one (executor.py, "Exactly
once"); a job that is queued or running is waited for, one that ended is taken as if seen ending, and
only a node with no job is started. A job that runs what an edit replaced is not taken over (release.py
takes_over: its node re-planned, or a parent of it running again): it is cancelled and the node starts again.

Ctrl-C or SIGTERM (from `dagflow cancel`) cancels every active job and records them interrupted; any other
error stops the driver and leaves the jobs running for the next one to adopt.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.job import (
    ACTIVE,
    ENDED,
    UNKNOWN,
    Executor,
    ExecutorError,
    Job,
    JobError,
    JobState,
    job_for,
    jobs_started,
    known_jobs,
    unfinished_jobs,
)
from dagflow.engines.jobs.release import Driving, Release, takes_over
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.journal import (
    RUNNING,
    JournalState,
    JournalWriter,
    start_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.lock import RunLock
from dagflow.run.reporting import Reporter, RunInfo
from dagflow.run.result import Failure, RunResult
from dagflow.run.session import RunStorageError, Work, disk_full

T = TypeVar("T")
# A test's crash point (tests/test_job_executor.py): the driver SIGKILLs itself after a submission and before its
# journal line, the one moment the executor knows of a job the journal does not.
_KILL_AFTER_SUBMIT = os.environ.get("DAGFLOW_TEST_KILL_AFTER_SUBMIT") == "1"
_MISSING_LOOKS = 3  # looks in a row that find no job of an active attempt's key before it counts as lost
_CANCEL_WAIT_S = 120.0  # how long cancelled jobs may take to end before they are recorded interrupted anyway


@dataclass(slots=True)
class Active:
    """A job of ours that has not ended yet."""

    job: Job
    started: float  # monotonic time it was submitted (or adopted)
    killed: str | None = None  # "timeout" or "interrupt": why the scheduler cancelled it
    cancelled_at: float | None = None
    missing: int = 0  # looks in a row that found no job of its key
    job_id: str | None = None  # the executor's id of it (run_job's answer; None for an adopted one)
    started_seen: bool = False  # its start is journaled: the executor said it runs (or ended)


class JobScheduler(Release, Driving):
    """Drives one run of `work` on `executor` until every node has finished or the run is stopped."""

    def __init__(
        self, executor: Executor, work: Work, layout: RunLayout, reporter: Reporter, handle_signals: bool = False
    ) -> None:
        self.executor = executor
        self.plan: Plan = work.plan  # what to run is what the journal shows unfinished (Release._carry_done)
        self.layout = RunLayout(layout.runs_dir.absolute(), layout.run_id)
        self.reporter = reporter
        self.handle_signals = handle_signals
        settings = executor.settings
        self.force = tuple(settings.get("force") or ())
        self.use_cache = not settings.get("no_cache")
        self.max_active: int = settings.get("jobs") or executor.max_active
        self.active: dict[str, Active] = {}
        self.states: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.attempts: dict[str, int] = {}
        self.failed_tries: dict[str, int] = {}
        self.restarts: dict[str, int] = {}
        self.failures: list[Failure] = []
        self.cache: NodeCache | None = None
        self.forget: frozenset[str] = frozenset()
        self._stop = threading.Event()
        self._failing_since: float | None = None  # when the looks at the jobs began to fail, in a row
        self._stopping = False

    def request_stop(self, *_: object) -> None:
        self._stop.set()

    def run(self) -> RunResult:
        lock = RunLock(self.layout.lock_path)
        lock.acquire()
        restore = self._install_signal_handlers(self.handle_signals)
        try:
            try:
                self.journal = JournalWriter(self.layout.journal_path)
            except OSError as error:
                if not disk_full(error):
                    raise
                raise RunStorageError.stopped(self.layout, error, 0) from None
            try:
                return self._run()
            except OSError as error:  # the run directory's disk is full: the jobs run on, a resume adopts them
                if not disk_full(error):
                    raise
                raise RunStorageError.stopped(self.layout, error, len(self.active)) from None
            finally:  # the cache before the journal, as _commit writes them
                if self.cache is not None:
                    with contextlib.suppress(OSError):
                        self.cache.close()
                with contextlib.suppress(OSError):
                    self.journal.close()
        finally:
            restore()
            lock.release()
            with contextlib.suppress(OSError, ValueError):
                self.reporter.flush()

    # --- the loop ---------------------------------------------------------------------------------------

    def _run(self) -> RunResult:
        t0 = time.monotonic()
        plan, layout = self.plan, self.layout
        layout.logs_dir.mkdir(parents=True, exist_ok=True)
        self.cache = (
            NodeCache(layout.cache_dir.absolute(), Path(os.path.realpath(plan.workdir))) if self.use_cache else None
        )
        prior = self._prior()
        for name, record in prior.nodes.items():
            if name in plan.nodes:
                self.attempts[name] = jobs_started(record)
                self.restarts[name] = record.restarts
        done = self._carry_done(prior)
        self._journal_start(prior)
        adopted = self._adopt(prior, done)
        self.journal.flush()
        where = self.executor.system
        self._open(RunInfo(plan, layout.run_id, layout.run_dir, None, prior.runners > 0, done, where=where), done,
                   adopted, self.force)  # fmt: skip
        self._observed(adopted)
        poll_s = self.executor.poll_s
        while True:
            if self._stop.is_set() and not self._stopping:
                self._cancel_all()
            if not self._stopping:
                self._start_ready()
            if not self.active:
                if self._stopping or not self.tracker.has_ready():
                    break
                continue  # everything started ended at once (a submission refused): start the next ones
            self._commit()
            self.reporter.flush()
            self._stop.wait(poll_s)
            self._look()
            if self.reporter.tick_interval is not None:
                self.reporter.tick()
        return self._result(t0, len(done), self._stopping)

    def _adopt(self, prior: JournalState, done: set[str]) -> dict[str, JobState]:
        """Take over the jobs an earlier driver left (the module docstring): name -> what its job is now."""
        asked = unfinished_jobs(self.plan, self.layout, prior, done)
        while (found := self._known(asked)) is None:  # nothing starts before the jobs left behind are known
            if self._stop.wait(self.executor.poll_s):
                raise ExecutorError(
                    f"run {self.layout.run_id} stopped before it started anything: the executor never said which "
                    "jobs an earlier runner left"
                )
        taken = {name for name in found if takes_over(self.plan, prior, done, name)}
        stale = [job for name, (job, state) in found.items() if name not in taken and state.state != ENDED]
        if stale:
            self._cancel(stale)
        adopted: dict[str, JobState] = {}
        for name, (job, state) in found.items():
            journaled = job.attempt <= self.attempts.get(name, 0)  # else a killed driver did not journal its start
            self.attempts[name] = max(job.attempt, self.attempts.get(name, 0))  # a stale one's key is not reused
            if name not in taken:
                continue
            node = self.plan.nodes[name]
            if self.cache is not None:
                self.keys[name] = self.cache.key(self.plan, node, [self.keys.get(up, up) for up in node.parents])
            record = prior.nodes.get(name)
            earlier = (record.attempts if record is not None else 0) - (1 if journaled else 0)
            self.failed_tries[name] = max(0, earlier)  # the attempts before this one, each a failed try
            self.active[name] = Active(job, time.monotonic(), started_seen=journaled)
            self.states[name] = RUNNING
            if journaled:
                self.reporter.node_started(name, job.attempt, ())
            adopted[name] = state
        return adopted

    def _start_ready(self) -> None:
        limit = self.max_active
        for _step, queue in self.tracker.ready_queues():
            while queue and len(self.active) < limit:
                self._start(queue.popleft())
            if len(self.active) >= limit:
                return

    def _start(self, name: str) -> None:
        attempt = self.attempts.get(name, 0) + 1
        self.attempts[name] = attempt
        job = job_for(self.plan, self.layout, name, attempt)
        active = Active(job, time.monotonic())
        self.active[name] = active
        self.states[name] = RUNNING
        try:
            active.job_id = self._asked("start a job", self.executor.run_job, job)
        except JobError as error:
            self._seen_start(active)
            self._finished(active, 127, f"cannot start: {error}")
            return
        if _KILL_AFTER_SUBMIT:
            os.kill(os.getpid(), signal.SIGKILL)

    def _seen_start(self, active: Active) -> None:
        """The job runs (or ended, or could not start): its start is journaled now, so a queued node shows as
        pending, as its executor shows it queued; a timeout counts from here."""
        active.started_seen = True
        active.started = time.monotonic()
        job = active.job
        self.journal.write(start_event(job.node, job.attempt, job=active.job_id))
        self.reporter.node_started(job.node, job.attempt, ())

    def _look(self) -> None:
        """Cancel what ran past its timeout, then take what ended."""
        now = time.monotonic()
        overdue = []
        for active in self.active.values():
            timeout = active.job.step.timeout_s
            if active.killed is None and timeout and active.started_seen and now - active.started > timeout:
                active.killed, active.cancelled_at = "timeout", now
                overdue.append(active.job)
        if overdue:
            self._cancel(overdue)
        if not self.active:
            return
        states = self._look_at([active.job for active in self.active.values()])
        if states is not None:
            self._observed(
                {name: states.get(active.job.key, JobState(UNKNOWN)) for name, active in self.active.items()}
            )

    def _look_at(self, jobs: Sequence[Job]) -> dict[str, JobState] | None:
        """check_active; None when it failed in a way the next look may not (its scheduler restarting): said
        once, tried again each turn, and after the executor's look_grace_s of failing looks the driver stops
        (its jobs run on for a resume to adopt)."""
        try:
            states = self.executor.check_active(jobs)
        except DagflowError:
            raise
        except Exception as error:
            if disk_full(error):
                raise
            self._look_failed(error)
            return None
        self._failing_since = None
        return states

    def _look_failed(self, error: Exception) -> None:
        now = time.monotonic()
        if self._failing_since is None:
            self._failing_since = now
            print(
                f"dagflow: run {self.layout.run_id}: the executor could not look at its jobs "
                f"({type(error).__name__}: {error}); trying again for {self.executor.look_grace_s:.0f} s",
                file=sys.stderr,
            )
        elif now - self._failing_since >= self.executor.look_grace_s:
            raise self._failed("look at its jobs", error) from None

    def _observed(self, states: dict[str, JobState]) -> None:
        """What the executor said of active jobs, by node: starts seen, ends taken, lost jobs given up on."""
        now = time.monotonic()
        for name, state in states.items():
            active = self.active[name]
            if state.state == ACTIVE and not active.started_seen:
                self._seen_start(active)
            if state.state == ENDED:
                self._ended(active, state)
            elif state.state == UNKNOWN:
                active.missing += 1
                if active.missing >= _MISSING_LOOKS:
                    self._ended(active, JobState(ENDED, why="its job is gone: the executor no longer knows it"))
            elif active.cancelled_at is not None and now - active.cancelled_at > _CANCEL_WAIT_S:
                self._ended(active, JobState(ENDED, why=f"still there {_CANCEL_WAIT_S:.0f} s after it was cancelled"))

    def _cancel_all(self) -> None:
        self._stopping = True
        now = time.monotonic()
        jobs = []
        for active in self.active.values():
            active.killed, active.cancelled_at = "interrupt", now
            jobs.append(active.job)
        if jobs:
            self._cancel(jobs)

    def _known(self, asked: Sequence[Job]) -> dict[str, tuple[Job, JobState]] | None:
        """Of the jobs asked about, those the executor knows (job.py known_jobs); None: the look failed."""
        states = self._look_at(asked) if asked else {}
        return None if states is None else known_jobs(states, asked)

    def _cancel(self, jobs: Sequence[Job]) -> None:
        self._asked("cancel jobs", self.executor.cancel_jobs, jobs)

    def _asked(self, what: str, call: Callable[..., T], *args: object) -> T:
        """An executor call; what it raises beyond JobError and dagflow's errors stops the run, saying so."""
        try:
            return call(*args)
        except DagflowError:
            raise
        except OSError as error:
            if disk_full(error):  # the executor's own files, in the run directory: the same full disk
                raise
            raise self._failed(what, error) from None
        except Exception as error:
            raise self._failed(what, error) from None

    def _failed(self, what: str, error: Exception) -> ExecutorError:
        run_id = self.layout.run_id
        return ExecutorError(
            f"run {run_id} stopped: the executor could not {what}: {type(error).__name__}: {error}; the jobs "
            f"it started run on, and `dagflow run --resume {run_id}` takes them over"
        )

    # --- what an end means ------------------------------------------------------------------------------

    def _ended(self, active: Active, state: JobState) -> None:
        if not active.started_seen:  # it ended between two looks (or was never seen): its start is journaled first
            self._seen_start(active)
        rc = state.rc
        why = (state.why or "ended without an exit code") if rc is None else None
        self._finished(active, rc if rc is not None else -1, why)

    def _finished(self, active: Active, rc: int, why: str | None) -> None:
        job = active.job
        self.active.pop(job.node, None)
        duration = time.monotonic() - active.started
        self._attempt_ended(job.node, job.step, job.attempt, rc, why, active.killed, self._stopping, duration)
