"""How deep followers queue behind a running node and how long the runner lets replies gather
(dagflow/engines/local/queueing.py): deep and gathering only for nodes measured short, two and no
gathering otherwise."""

from __future__ import annotations

import math

from dagflow.engines.local.queueing import (
    BASE_DEPTH,
    GATHER_MAX_S,
    MAX_DEPTH,
    QUEUE_HORIZON_S,
    FollowerQueueing,
)


def test_a_step_not_measured_yet_queues_two_deep_as_any_node_may() -> None:
    queueing = FollowerQueueing()
    assert queueing.typical_s("train") == math.inf
    assert [queueing.may_queue(depth, 0.0, "train") for depth in range(4)] == [True, True, False, False]


def test_short_nodes_queue_deeper_up_to_the_horizon_and_the_cap() -> None:
    queueing = FollowerQueueing()
    queueing.observed("tiny", 0.001)
    queueing.observed("short", 0.004)
    depth, queued = BASE_DEPTH, 2 * 0.004
    while queueing.may_queue(depth, queued, "short"):
        depth, queued = depth + 1, queued + 0.004
    assert queued <= QUEUE_HORIZON_S + 0.004 and depth == 5  # 5 x 4 ms fill the 20 ms horizon
    depth = BASE_DEPTH
    while queueing.may_queue(depth, depth * 0.0001, "tiny") and depth < 100:
        depth += 1
    assert depth == MAX_DEPTH


def test_a_long_node_never_queues_beyond_two() -> None:
    queueing = FollowerQueueing()
    queueing.observed("train", 3600.0)
    assert queueing.may_queue(1, 3600.0, "train")
    assert not queueing.may_queue(BASE_DEPTH, 0.0, "train")


def test_the_moving_average_follows_a_step_that_gets_slower() -> None:
    queueing = FollowerQueueing()
    queueing.observed("s", 0.001)
    for _ in range(30):
        queueing.observed("s", 1.0)
    assert queueing.typical_s("s") > 0.99
    assert not queueing.may_queue(BASE_DEPTH, 0.0, "s")


def test_replies_gather_for_half_the_emptiest_queue_within_bounds() -> None:
    queueing = FollowerQueueing()
    assert queueing.gather_s(0.0) == 0.0
    assert queueing.gather_s(0.0015) == 0.0  # under a millisecond saves nothing
    assert queueing.gather_s(0.006) == 0.003
    assert queueing.gather_s(1.0) == GATHER_MAX_S
