"""A run's nodes summed up per step: counts by state, the step's wall time (its first node's start to its
last node's end) and its slowest node. `dagflow status` prints it for a big run; the report shows it."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dagflow.run.journal import RETRYING, RUNNING

STEP_ROW_LIMIT = 30  # steps a text view lists one row each; status --json has every step


@dataclass(slots=True)
class StepRow:
    step: str
    nodes: int
    counts: dict[str, int]  # by node state, in the run's state order
    started: float | None  # the earliest start of its nodes' latest attempts
    ended: float | None  # the latest end (now, while one of them runs)
    slowest: str | None  # the node whose latest attempt took longest
    slowest_s: float | None

    @property
    def wall_s(self) -> float | None:
        return None if self.started is None or self.ended is None else max(0.0, self.ended - self.started)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "nodes": self.nodes,
            "counts": self.counts,
            "started": self.started,
            "ended": self.ended,
            "wall_s": None if self.wall_s is None else round(self.wall_s, 3),
            "slowest": self.slowest,
            "slowest_s": None if self.slowest_s is None else round(self.slowest_s, 3),
        }


def step_rows(
    names: Sequence[str],
    steps: Iterable[str],
    states: Sequence[str],
    times: Iterable[tuple[float | None, float | None]],
    state_order: Sequence[str],
    now: float | None = None,
) -> list[StepRow]:
    """Per step, from each node's name, step, state and (started, ended), in plan order (steps come out in
    the order their first node does). A running node that has not ended counts until now; one cut off, none."""
    now = time.time() if now is None else now
    steps = list(steps)
    rows = {step: StepRow(step, count, {}, None, None, None, None) for step, count in Counter(steps).items()}
    counted = Counter(zip(steps, states, strict=True))
    live = (RUNNING, RETRYING)
    for name, step, state, (started, ended) in zip(names, steps, states, times, strict=True):
        if started is None:
            continue
        end = ended if ended is not None else now if state in live else started
        row = rows[step]
        if row.started is None or started < row.started:
            row.started = started
        if row.ended is None or end > row.ended:
            row.ended = end
        if row.slowest_s is None or end - started > row.slowest_s:
            row.slowest, row.slowest_s = name, max(0.0, end - started)
    rank = {state: position for position, state in enumerate(state_order)}
    for (step, state), count in sorted(counted.items(), key=lambda item: (rank.get(item[0][1], len(rank)), item[0][1])):
        rows[step].counts[state] = count
    return list(rows.values())


def rows_to_list(rows: list[StepRow], quiet: frozenset[str], limit: int = STEP_ROW_LIMIT) -> list[StepRow]:
    """At most `limit` rows, in plan order: the steps with a node in a state not in `quiet` first."""
    if len(rows) <= limit:
        return rows
    loud = [any(state not in quiet for state in row.counts) for row in rows]
    ranked = sorted(range(len(rows)), key=lambda index: not loud[index])  # stable: plan order within each
    chosen = set(ranked[:limit])
    return [row for index, row in enumerate(rows) if index in chosen]
