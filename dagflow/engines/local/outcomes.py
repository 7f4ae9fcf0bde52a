"""Outcomes: what the keeper reports of a node, recorded: its start, and its end with what that end
means (succeeded, failed, interrupted, out of memory, checkpointed, or a try that retries), journaled and
reported, and what follows from it (its children released, or blocked); at the end, the run's result.

A mixin of LocalRunner (runner.py), on the runner's own tables: no indirection on the per-node path.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.graph import DagTracker
from dagflow.engines.jobs.release import checkpoint_exit, retries_left
from dagflow.engines.local.memory_limit import MEMORY_CHECK_S, MemoryGrowth
from dagflow.engines.local.memory_limit import enforced as memory_enforced
from dagflow.engines.local.node_reaper import NodeReaper
from dagflow.engines.local.procs import kill_group
from dagflow.engines.local.running_node import RunningNode
from dagflow.engines.local.usage_recorder import UsageRecorder, attempt_key
from dagflow.plan import Plan
from dagflow.run.exits import describe_exit
from dagflow.run.journal import (
    CHECKPOINTED,
    FAILED,
    INTERRUPTED,
    RETRY,
    RETRYING,
    SUCCEEDED,
    JournalWriter,
    end_event,
    finish_event,
    start_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter
from dagflow.run.result import RUN_FAILED, RUN_INTERRUPTED, RUN_SUCCEEDED, Failure, RunResult

# A test's crash point (tests/test_local_cache_durable.py): the runner SIGKILLs itself after writing a
# success's cache entry and before its journal event, the one moment the two disagree.
_KILL_BETWEEN_WRITES = os.environ.get("DAGFLOW_TEST_KILL_BETWEEN_WRITES") == "1"


class Outcomes:
    """Node starts and ends. Uses the runner's attributes below, and `_free` and `_release` (ready.py)."""

    plan: Plan
    layout: RunLayout
    memory: MemoryGrowth
    usage: UsageRecorder
    reaper: NodeReaper
    reporter: Reporter
    journal: JournalWriter
    cache: NodeCache | None
    tracker: DagTracker
    running: dict[str, RunningNode]
    states: dict[str, str]
    keys: dict[str, str]
    failed_tries: dict[str, int]  # failed attempts (what retries count)
    restarts: dict[str, int]  # checkpoint restarts over the whole run (what max_restarts caps)
    failures: list[Failure]
    _stops_handled: int
    _keeper_pid: int | None  # our keeper's (keeper_link.py)
    _add_timer: Callable[[float, str, str, int], None]  # Limits.add (limits.py)
    _free: Callable[[RunningNode], None]  # ready.py
    _release: Callable[[list[str]], None]  # ready.py
    _failed_for_good: Callable[[str, str], None]  # jobs/release.py Release
    _run_result: Callable[[str, Path, str, float, int], RunResult]  # jobs/release.py Driving

    def _started(self, running: RunningNode, pid: int) -> None:
        """The keeper started it (at once, or as a follower when its leader exited)."""
        name, attempt, step = running.name, running.attempt, running.step
        running.pid = pid
        running.started = now = time.monotonic()
        devices = tuple(gpu.index for gpu in running.gpus)
        self.usage.started(name, devices, None)
        self.usage.pid_known(name, pid)
        # Journaled this turn (its keeper has recorded it in procs.jsonl already).
        self.journal.write(start_event(name, attempt, pid=pid))
        if running.pending_signal is not None:
            kill_group(pid, running.pending_signal)
        if step.timeout_s:
            self._add_timer(now + step.timeout_s, "timeout", name, attempt)
        if memory_enforced(step):
            self._add_timer(now + MEMORY_CHECK_S, "memory", name, attempt)
        self.reporter.node_started(name, attempt, devices)

    def _cannot_start(self, running: RunningNode, program: str, error: str) -> None:
        why = f"cannot start {program!r}: {error}"
        path = self.layout.stderr_path(running.name)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if running.attempt > 1 else os.O_TRUNC)
        fd = os.open(path, flags, 0o644)
        try:
            banner = f"\n=== dagflow: attempt {running.attempt} ===\n" if os.fstat(fd).st_size else ""
            os.write(fd, f"{banner}dagflow: {why}\n".encode())
        finally:
            os.close(fd)
        self._finished(running, 127, why)

    def _exited(self, running: RunningNode, rc: int) -> None:
        why = None
        if running.kill_reason == "timeout":
            why = f"timed out after {running.step.timeout_s}s"
        elif running.kill_reason == "interrupt":
            why = "interrupted"
        elif running.kill_reason == "oom" or (
            running.kill_reason is None and rc == -signal.SIGKILL and memory_enforced(running.step)
        ):  # a SIGKILL nobody here sent: the kernel's OOM killer
            running.kill_reason = "oom"
            limit = self.memory.limit(running.name, running.step)
            peak = self.memory.peaks.get(running.name)
            why = f"out of memory: over its {limit} MB limit" + (f" ({peak:.0f} MB resident)" if peak else "")
        elif rc != 0:
            why = describe_exit(rc)
        self._finished(running, rc, why)

    def _finished(self, running: RunningNode, rc: int, why: str | None) -> None:
        name, step, attempt = running.name, running.step, running.attempt
        if self.running.get(name) is running:
            self._free(running)
        self.reaper.node_ended()
        keeper = running.keeper if running.adopted else self._keeper_pid
        devices = tuple(gpu.index for gpu in running.gpus)
        key = attempt_key(keeper, running.pid)  # None: it never started, and gets no usage record
        resources = self.memory.resources(name, step)  # what this attempt asked (before any growth)
        self.usage.finished(
            name, step.name, attempt, resources, devices, running.measured, key, rc, running.kill_reason
        )
        duration = time.monotonic() - running.started
        checkpoint = checkpoint_exit(step, rc, running.kill_reason is not None, self.restarts.get(name, 0))
        if checkpoint is not None:
            why = checkpoint[1]
        if running.kill_reason == "interrupt":
            state = INTERRUPTED
        elif why is None:
            state = SUCCEEDED
        elif checkpoint is not None and checkpoint[0]:
            state = CHECKPOINTED
            self.restarts[name] = self.restarts.get(name, 0) + 1
        elif running.kill_reason == "oom" and not self._stops_handled:
            grown = self.memory.grow(name, step)
            if grown:  # runs again with more memory: not a failed try that `retries` counts
                state = RETRY
                self.failed_tries[name] = self.failed_tries.get(name, 0) - 1
                why = f"{why}; again with {grown} MB (memory_max {step.resources.memory_max_mb} MB)"
            else:
                state = FAILED
                why = f"{why}, at its memory_max"
        elif retries_left(step, self.failed_tries.get(name, 0), rc, running.kill_reason is not None,
                          bool(self._stops_handled)):
            state = RETRY
        else:
            state = FAILED
        key = self.keys.get(name)
        kept = key if state == SUCCEEDED and key else None
        self.journal.write(end_event(name, state, attempt=attempt, rc=rc, why=why or None, key=kept), durable=True)
        tries = self.failed_tries.get(name, 0) + 1  # restarts from a checkpoint are the same attempt
        self.reporter.node_finished(name, state, tries, rc, why, duration)
        if state == SUCCEEDED:
            self.states[name] = SUCCEEDED
            if key and self.cache is not None:
                self.cache.record(key, self.plan, self.plan.nodes[name])
            self._release(self.tracker.succeeded(name))
        elif state == RETRY:
            self.failed_tries[name] = self.failed_tries.get(name, 0) + 1
            self.states[name] = RETRYING
            self.tracker.push(name, front=True)
        elif state == CHECKPOINTED:  # its checkpoint files stay where it wrote them; it starts again from them
            self.states[name] = CHECKPOINTED
            if not self._stops_handled:
                self.tracker.push(name, front=True)
        elif state == INTERRUPTED:
            self.states[name] = INTERRUPTED
        else:
            self._failed_for_good(name, why or describe_exit(rc))

    def _commit(self, sync_now: bool = False) -> float | None:
        """Write what this turn decided: the cache entries of its successes, then the journal (which
        returns when it wants the next commit, `JournalWriter.commit`). In this order a kill -9 at any
        moment leaves each success in the cache, or in the journal, or in both: a success only journaled
        would be run again by the next plain run, which looks in the cache; one only cached is an exit
        the keeper recorded and the journal lacks, which the next run takes (earlier_runs.py)."""
        if self.cache is not None and self.cache.flush() and _KILL_BETWEEN_WRITES:
            os.kill(os.getpid(), signal.SIGKILL)
        if sync_now:
            self.journal.flush()
            return None
        return self.journal.commit()

    def _result(self, t0: float, resumed_done: int) -> RunResult:
        """The run's result, journaled (its `finish` event) and reported."""
        state = RUN_INTERRUPTED if self._stops_handled else RUN_FAILED if self.failures else RUN_SUCCEEDED
        self.usage.flush()
        self.journal.write(finish_event(state), durable=True)
        self._commit(sync_now=True)
        return self._run_result(self.layout.run_id, self.layout.run_dir, state, t0, resumed_done)
