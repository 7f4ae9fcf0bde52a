"""Outcomes: what the keeper reports of a node, recorded: its start, and its end, with its slot freed, its
usage record written and, after the kernel's OOM killer, its memory grown; what the end means is the rule
every scheduler shares (jobs/release.py `_attempt_ended`).

A mixin of LocalRunner (runner.py), on the runner's own tables: no indirection on the per-node path.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from dagflow.engines.local.memory_limit import MEMORY_CHECK_S, MemoryGrowth
from dagflow.engines.local.memory_limit import enforced as memory_enforced
from dagflow.engines.local.node_reaper import NodeReaper
from dagflow.engines.local.procs import kill_group
from dagflow.engines.local.running_node import RunningNode
from dagflow.engines.local.usage_recorder import UsageRecorder, attempt_key
from dagflow.plan import Plan
from dagflow.run.journal import (
    JournalWriter,
    start_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter


class Outcomes:
    """Node starts and ends. Uses the runner's attributes below, `_free` (ready.py) and `_attempt_ended`."""

    plan: Plan
    layout: RunLayout
    memory: MemoryGrowth
    usage: UsageRecorder
    reaper: NodeReaper
    reporter: Reporter
    journal: JournalWriter
    running: dict[str, RunningNode]
    _stops_handled: int
    _keeper_pid: int | None  # our keeper's (keeper_link.py)
    _add_timer: Callable[[float, str, str, int], None]  # Limits.add (limits.py)
    _free: Callable[[RunningNode], None]  # ready.py
    _attempt_ended: Callable[..., None]  # jobs/release.py Release

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
        why = None  # the end's own reason; a timeout's, an interrupt's and an exit code's are _attempt_ended's
        if running.kill_reason is None and rc == -signal.SIGKILL and memory_enforced(running.step):
            running.kill_reason = "oom"  # a SIGKILL nobody here sent: the kernel's OOM killer
        if running.kill_reason == "oom":
            limit = self.memory.limit(running.name, running.step)
            peak = self.memory.peaks.get(running.name)
            why = f"out of memory: over its {limit} MB limit" + (f" ({peak:.0f} MB resident)" if peak else "")
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
        grown = self.memory.grow(name, step) if running.kill_reason == "oom" and not self._stops_handled else None
        duration = time.monotonic() - running.started
        self._attempt_ended(
            name, step, attempt, rc, why, running.kill_reason, bool(self._stops_handled), duration, grown
        )
