"""Following a run that a batch system runs (HTCondor, Slurm, Grid Engine) with the local run's reporters.

The local runner tells its reporter of each start and end as it happens. A batch engine's `dagflow run`
only sees the run's status now and then (its status readers, polled while it waits), so StateFeed turns
the differences between two looks into the same calls, in the order the nodes' own times give: a node
seen running is started; one seen succeeded, failed, retrying or interrupted has finished (and, if no look
caught it running, started first); one seen held is held; nodes that will not run because a node above
them failed are blocked by it. `follow_run` drives the feed until the run has ended and returns its
RunResult after the reporter showed the same summary as a local run (counts, failures, promotions).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from dagflow.plan import Plan
from dagflow.run.journal import (
    CACHED,
    CHECKPOINTED,
    DONE_STATES,
    FAILED,
    INTERRUPTED,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    NodeRecord,
)
from dagflow.run.layout import DEFAULT_RUNS_DIR
from dagflow.run.reporting import PlainReporter, Reporter, RunInfo
from dagflow.run.result import Failure, RunResult
from dagflow.run.status import HELD, RunStatus

# Where the feed last left a node (what its reporter was told).
_WAITING = "waiting"  # not started (pending or queued)
_HELD = "held"
_RUNNING = "running"
_BETWEEN = "between"  # an attempt ended and another will start (a retry, a checkpoint restart)
_DONE = "done"

_ENDED = (SUCCEEDED, FAILED, INTERRUPTED)
_AGAIN = {RETRYING: "retry", CHECKPOINTED: "checkpointed"}


def runs_dir_hint(runs_dir: Path) -> str:
    """What a `resume with:` hint adds for a run outside the default runs directory."""
    return "" if Path(runs_dir) == DEFAULT_RUNS_DIR else f" --runs-dir {runs_dir}"


def terminal_reporter(runs_dir_hint: str = "", show_starts: bool = False) -> Reporter:
    """The live view on a terminal, else plain lines (a log, a pipe). show_starts: a plain line for each
    node's start too (batch engines, whose nodes may wait long in a queue first)."""
    if sys.stdout.isatty():
        from dagflow.run.live_view import RichReporter  # rich is only needed on a terminal

        return RichReporter(runs_dir_hint=runs_dir_hint)
    return PlainReporter(runs_dir_hint=runs_dir_hint, show_starts=show_starts)


class StateFeed:
    """Turns successive statuses of one run into reporter calls (the module docstring says which).

    `before`: the run's status before this submission (a resume): what it shows is old news, and nodes
    finished then are done."""

    def __init__(self, reporter: Reporter, plan: Plan, before: RunStatus | None = None) -> None:
        self.reporter = reporter
        self.plan = plan
        self.phase: dict[str, str] = {}
        self.seen: dict[str, tuple[str, int]] = {}  # state and attempts at the last look
        self.attempt: dict[str, int] = {}  # the attempt the reporter was told started
        self.done: set[str] = set()  # finished before this submission (not rerun)
        # How each node last ended, as reported (or before this submission): the same end seen again is
        # old news (a batch node's journal shows its earlier attempt's end until its wrapper starts again).
        self.ended_as: dict[str, tuple[str, int, float | None]] = {}
        self.culprits: dict[str, str] = {}  # blocked node -> the failed node above it
        if before is not None:
            for name, state in before.node_states().items():
                record = before.record(name)
                self.seen[name] = (state, record.attempts)
                if state in DONE_STATES:
                    self.done.add(name)
                    self.phase[name] = _DONE
                elif state in (*_ENDED, UPSTREAM_FAILED):
                    self.phase[name] = _DONE  # a rerun of it is a new start
                if state in _ENDED:
                    self.ended_as[name] = (state, record.attempts, record.ended)

    def observe(self, status: RunStatus) -> None:
        """Report what changed since the last look, ordered by when it happened."""
        now = time.time()
        events: list[tuple[float, int, Callable[[], None]]] = []
        blocked: list[str] = []
        states = status.node_states()

        def at(when: float | None, call: Callable[[], None]) -> None:
            events.append((now if when is None else when, len(events), call))

        for name, state in states.items():
            record = status.record(name)
            look = (state, record.attempts)
            if self.seen.get(name) == look:
                continue
            self.seen[name] = look
            phase = self.phase.get(name, _WAITING)
            if state == HELD:
                if phase != _HELD:
                    self.phase[name] = _HELD
                    at(None, lambda name=name, why=record.why: self.reporter.node_held(name, why))
            elif state == RUNNING:
                if phase == _RUNNING and record.attempts > self.attempt.get(name, 0):  # a whole attempt unseen
                    self._finish(at, name, "retry", record, None)
                if phase != _RUNNING or record.attempts > self.attempt.get(name, 0):
                    self._start(at, name, record)
            elif state in _AGAIN:
                if phase not in (_RUNNING, _HELD):
                    self._start(at, name, record)
                self._finish(at, name, _AGAIN[state], record, record.ended)
                self.phase[name] = _BETWEEN
            elif state in _ENDED:
                if self.ended_as.get(name) == (state, record.attempts, record.ended):
                    continue  # the end already reported, seen again
                self.ended_as[name] = (state, record.attempts, record.ended)
                ran = phase == _RUNNING or (phase == _HELD and state != SUCCEEDED)  # told it started (or held)
                again = phase != _BETWEEN or record.attempts > self.attempt.get(name, 0)  # a new attempt
                if not ran and (state == SUCCEEDED or (record.started is not None and again)):
                    self._start(at, name, record)  # it ran between two looks
                elif not ran and state == INTERRUPTED:
                    self.phase[name] = _DONE  # stopped before it started again: the summary counts it
                    continue
                self._finish(at, name, state, record, record.ended)
                self.phase[name] = _DONE
            elif state == CACHED and phase != _DONE:
                self.phase[name] = _DONE
                at(record.ended, lambda name=name: self.reporter.node_cached(name))
            elif state == UPSTREAM_FAILED and phase != _DONE:
                self.phase[name] = _DONE
                blocked.append(name)
            # pending and queued: nothing to say (a released hold shows when the node starts)
        by_culprit: dict[str, list[str]] = {}
        for name in blocked:
            by_culprit.setdefault(self._culprit(name, states), []).append(name)
        for culprit, names in by_culprit.items():
            ended = status.record(culprit).ended
            at(ended, lambda names=names, culprit=culprit: self.reporter.nodes_blocked(names, culprit))
        for _, _, call in sorted(events, key=lambda event: (event[0], event[1])):
            call()

    def _start(self, at: Callable[[float | None, Callable[[], None]], None], name: str, record: NodeRecord) -> None:
        attempt = max(record.attempts, 1)
        self.attempt[name] = attempt
        self.phase[name] = _RUNNING
        when = record.started if record.started is not None else record.ended
        if when is not None and record.ended is not None:
            when = min(when, record.ended)
        at(when, lambda: self.reporter.node_started(name, attempt, ()))

    def _finish(
        self,
        at: Callable[[float | None, Callable[[], None]], None],
        name: str,
        state: str,
        record: NodeRecord,
        when: float | None,
    ) -> None:
        attempt = max(self.attempt.get(name, record.attempts), 1)
        ended = record.ended if state != "retry" or when is not None else None
        duration = max(0.0, ended - record.started) if ended is not None and record.started is not None else 0.0
        why = record.why if state != SUCCEEDED else None
        rc = record.rc

        def call() -> None:
            self.reporter.node_finished(name, state, attempt, rc, why, duration)

        at(when, call)

    def _culprit(self, name: str, states: dict[str, str]) -> str:
        """The failed node above name that keeps it from running: a failed parent, else the culprit of a
        parent that will not run either (remembered: a big blocked subtree is walked once)."""
        path = [name]
        while True:
            node = path[-1]
            parents = self.plan.nodes[node].parents if node in self.plan.nodes else []
            found = next((parent for parent in parents if states.get(parent) in (FAILED, INTERRUPTED)), None)
            if found is None:
                found = next((self.culprits[parent] for parent in parents if parent in self.culprits), None)
            blocked = [parent for parent in parents if states.get(parent) == UPSTREAM_FAILED and parent not in path]
            if found is None and blocked:
                path.append(blocked[0])
                continue
            culprit = found or next(iter(parents), "a node upstream")
            for walked in path:
                self.culprits[walked] = culprit
            return culprit

    def result(self, status: RunStatus, duration_s: float) -> RunResult:
        states = status.node_states()
        failed = [name for name, state in states.items() if state == FAILED]
        failed.sort(key=lambda name: status.record(name).ended or 0.0)
        failures = [
            Failure(name, status.record(name).why or "failed", max(status.record(name).attempts, 1),
                    status.layout.failure_log(name))
            for name in failed
        ]  # fmt: skip
        return RunResult(
            run_id=status.run_id,
            run_dir=status.layout.run_dir,
            state=status.state,
            states=states,
            duration_s=duration_s,
            failures=failures,
            resumed_done=len(self.done),
        )


def follow_run(
    read: Callable[[], RunStatus],
    reporter: Reporter,
    where: str,
    poll_s: float,
    before: RunStatus | None = None,
    notes: Callable[[RunStatus, dict[str, str]], list[str]] | None = None,
) -> RunResult:
    """Report a submitted run as it goes, reading its status with `read` every poll_s seconds (the live
    view is redrawn in between), until the run has ended; return its result, shown as a local run's.

    before: the run's status before this submission, for a resume (see StateFeed). notes: lines the
    engine adds to the summary, from the final status and each node's final state (why DAGMan stopped)."""
    started = time.monotonic()
    status = read()
    feed = StateFeed(reporter, status.plan, before)
    info = RunInfo(status.plan, status.run_id, status.layout.run_dir, None, before is not None, feed.done, where)
    try:
        reporter.run_started(info)
        while True:
            feed.observe(status)
            reporter.flush()
            if not status.runner_alive:
                break
            _pause(reporter, poll_s)
            status = read()
    except BaseException:
        reporter.stop()
        raise
    result = feed.result(status, time.monotonic() - started)
    if notes is not None:
        result.notes = notes(status, result.states)
    reporter.run_finished(result)
    return result


def stop_notes(status: RunStatus, states: dict[str, str]) -> list[str]:
    """What a run's summary adds about why the job driving it stopped, when no failed node says why (a DAG
    DAGMan could not parse, its removed job)."""
    reason = status.extra.get("dagman_reason")
    failed = any(state == FAILED for state in states.values())
    return [f"DAGMan: {reason}"] if reason and status.state != SUCCEEDED and not failed else []


def _pause(reporter: Reporter, seconds: float) -> None:
    """Wait seconds, letting a live view redraw its clock meanwhile."""
    tick = reporter.tick_interval
    if not tick:
        time.sleep(seconds)
        return
    until = time.monotonic() + seconds
    while (left := until - time.monotonic()) > 0:
        time.sleep(min(tick, left))
        reporter.tick()
