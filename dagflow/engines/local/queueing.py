"""How many followers the runner queues in the keeper behind a running node, and how long it may let
the keeper's replies gather before it acts on them.

A follower (keeper.py) starts in its leader's slot the moment the leader exits, so the slot does not
wait for the runner to hear of the exit and answer. Two per slot hide that round trip for nodes of any
length. Nodes that take a millisecond need more: a runner that is busy or not scheduled for a few
milliseconds would otherwise find slots idle; and a runner that lets replies gather for a while (as a
network card coalesces interrupts) spends less per node than one woken by each reply. On 4,921 trivial
nodes and 2 slots this took dagflow from 1.40x to 1.20x a minimal executor's time (best of 5).

Both are sized in expected time, from how long each step's nodes have taken in this run: beyond the
first two, a slot's queue holds at most QUEUE_HORIZON_S of expected work, so a ready node of higher
priority waits behind at most that much (or two nodes of a step not measured yet); and the runner lets
replies gather for half the expected work left in its emptiest queue, at most GATHER_MAX_S, and not at
all while any running node has no follower.
"""

from __future__ import annotations

import math

BASE_DEPTH = 2
MAX_DEPTH = 32
QUEUE_HORIZON_S = 0.02
GATHER_MIN_S = 0.001  # shorter waits save nothing
GATHER_MAX_S = 0.01
_WEIGHT = 0.2  # of the newest node in a step's moving average


class FollowerQueueing:
    def __init__(self) -> None:
        self._typical: dict[str, float] = {}

    def observed(self, step: str, wall_s: float) -> None:
        """A node of step ran for wall_s (the keeper's measure, from its start to its exit)."""
        old = self._typical.get(step)
        self._typical[step] = wall_s if old is None else old + _WEIGHT * (wall_s - old)

    def typical_s(self, step: str) -> float:
        """The expected run time of a node of step: infinite until one has run."""
        return self._typical.get(step, math.inf)

    def may_queue(self, depth: int, queued_s: float, step: str) -> bool:
        """Whether a node of step may join a queue already depth deep, holding queued_s of expected work."""
        if depth < BASE_DEPTH:
            return True
        return depth < MAX_DEPTH and queued_s + self.typical_s(step) <= QUEUE_HORIZON_S

    def gather_s(self, least_queued_s: float) -> float:
        """How long to let replies gather when the emptiest queue holds least_queued_s of expected work."""
        wait = least_queued_s / 2
        return min(wait, GATHER_MAX_S) if wait >= GATHER_MIN_S else 0.0
