"""Timers and limits: when a running node must be signalled, and the signals themselves. A node past its
step's timeout gets SIGTERM, one over its memory limit SIGKILL (memory_limit.py), and a stop request
SIGTERMs every node (a second one SIGKILLs them); SIGKILL follows a SIGTERM after the kill grace."""

from __future__ import annotations

import heapq
import itertools
import signal
import time

from dagflow.engines.local.keeper_link import KeeperLink
from dagflow.engines.local.memory_limit import MEMORY_CHECK_S, MemoryGrowth, group_rss_mb
from dagflow.engines.local.running_node import RunningNode


class Limits:
    """The runner's timers (a heap of (when, seq, kind, node, attempt); kind "timeout", "memory" or
    "kill") over the nodes in `running`, the runner's own table."""

    def __init__(
        self, running: dict[str, RunningNode], link: KeeperLink, memory: MemoryGrowth, kill_grace_s: float
    ) -> None:
        self.running = running
        self.link = link
        self.memory = memory
        self.kill_grace_s = kill_grace_s
        self.timers: list[tuple[float, int, str, str, int]] = []  # (when, seq, kind, node, attempt)
        self._seq = itertools.count()

    def add(self, when: float, kind: str, name: str, attempt: int) -> None:
        heapq.heappush(self.timers, (when, next(self._seq), kind, name, attempt))

    def terminate(self, running: RunningNode, reason: str) -> None:
        """SIGTERM, then SIGKILL after the kill grace; reason says why it ended ("timeout", "interrupt")."""
        first = running.kill_reason is None
        running.kill_reason = reason
        if first:
            self.link.signal(running, signal.SIGTERM)
            self.add(time.monotonic() + self.kill_grace_s, "kill", running.name, running.attempt)

    def stop(self, first: bool) -> None:
        """A stop request: SIGTERM every node (the first request) or SIGKILL it (a later one)."""
        link = self.link
        # Followers still waiting are dropped first, and the drops written before any leader is
        # signalled: a leader that dies before its keeper has read the drop would start its follower.
        waiting = [running for running in self.running.values() if running.leader is not None]
        others = [running for running in self.running.values() if running.leader is None]
        for group in (waiting, others):
            for running in group:
                if first:
                    self.terminate(running, "interrupt")
                else:
                    link.signal(running, signal.SIGKILL)
            if link.outbox:
                link.send()

    def fire(self, now: float) -> None:
        """Act on the timers due by now."""
        timers = self.timers
        while timers and timers[0][0] <= now:
            _, _, kind, name, attempt = heapq.heappop(timers)
            running = self.running.get(name)
            if running is None or running.attempt != attempt:
                continue
            if kind == "timeout":
                self.terminate(running, "timeout")
            elif kind == "memory":
                self._check_memory(running, now)
            else:
                self.link.signal(running, signal.SIGKILL)

    def _check_memory(self, running: RunningNode, now: float) -> None:
        """Kill a node over its memory limit (memory_limit.py); check again later otherwise."""
        if running.kill_reason is not None or running.pid is None:
            if running.kill_reason is None:
                self.add(now + MEMORY_CHECK_S, "memory", running.name, running.attempt)
            return
        used = group_rss_mb(running.pid)
        if used > self.memory.limit(running.name, running.step):
            running.kill_reason = "oom"
            self.memory.peaks[running.name] = used
            self.link.signal(running, signal.SIGKILL)
        else:
            self.add(now + MEMORY_CHECK_S, "memory", running.name, running.attempt)
