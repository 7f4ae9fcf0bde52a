"""The optimiser contract every optimiser (gp, random, the Optuna ones) implements, and the helpers they share.

An optimiser is stateless between calls: the caller (the search scheduler, or a benchmark) passes the
whole history every time. That keeps the durable state in one place (the scheduler's database) and
makes a restarted scheduler ask exactly the same question again. Optimisers draw their randomness from
(seed, number of observations, number of pending points), so the same history gives the same answer.

Optimisers minimise. `loss()` turns a metric into a loss for a `goal: maximize` objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dagflow.search.space import Params, SearchSpace

# Snapped unit vectors closer than this (max-norm) are the same point.
SAME_POINT = 1e-9


@contextmanager
def single_threaded() -> Iterator[None]:
    """Keep the numerical libraries on one thread while an optimiser works. GP fits are many small matrix
    operations; on a 2-core machine multi-threaded BLAS/OpenMP spent more time synchronising than
    computing (about 10x slower, measured). The cap is applied at run time, around each suggestion, not
    through OMP_NUM_THREADS: environment variables act only before numpy is first imported, and they would
    leak into the trial processes a scheduler starts, whose training code should keep every core."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@dataclass(frozen=True, slots=True)
class Observation:
    """A finished trial: its parameters and its loss; None (or inf) when the trial failed. `outputs`
    holds its constraint values (feasible where each is >= 0) when the search has constraints.

    A NaN loss is a job that completed with a NaN objective: HIPS Spearmint's infeasible point (its
    add_nan_task_if_nans), which the gp optimiser models as an implicit constraint (gp_ei.py). It is
    `failed` too, so the optimisers that model no constraints (random, Optuna) and the objective's own
    model treat it as a point without a value; `objective_nan` tells it apart."""

    params: Mapping[str, Any]
    value: float | None
    outputs: Mapping[str, float] | None = None

    @property
    def feasible(self) -> bool:
        return not self.failed and all(value >= 0 for value in (self.outputs or {}).values())

    @property
    def failed(self) -> bool:
        return self.value is None or not math.isfinite(self.value)

    @property
    def objective_nan(self) -> bool:
        """Completed, but its objective is NaN: infeasible, not failed (HIPS Spearmint's semantics)."""
        return self.value is not None and math.isnan(self.value)


class Optimizer(Protocol):
    """Suggests the next points of a search space."""

    space: SearchSpace

    def suggest(
        self, n: int, observations: Sequence[Observation], pending: Sequence[Mapping[str, Any]] = ()
    ) -> list[Params]:
        """n new points, distinct from each other and from every observed and pending point where the
        space has room for them. `pending` are points submitted but not finished yet."""
        ...


def loss(value: float, goal: str) -> float:
    """The value an optimiser minimises for a metric value and an objective goal."""
    if goal == "minimize":
        return value
    if goal == "maximize":
        return -value
    raise ValueError(f"goal must be minimize or maximize, not {goal!r}")


def rng_for(seed: int, observations: Sequence[Observation], pending: Sequence[Any]) -> np.random.Generator:
    return np.random.default_rng([seed, len(observations), len(pending)])


class Taken:
    """Points that must not be suggested again: observed (failed ones too), pending, chosen so far."""

    def __init__(self, dim: int) -> None:
        self._rows: list[np.ndarray] = []
        self._matrix = np.empty((0, dim))

    def add(self, units: np.ndarray) -> None:
        units = np.array(units, ndmin=2)
        if len(units):
            self._rows.append(units)
            self._matrix = np.vstack([self._matrix, units])

    def mask(self, units: np.ndarray) -> np.ndarray:
        """True for each row of units that is already taken."""
        units = np.array(units, ndmin=2)
        if not len(self._matrix):
            return np.zeros(len(units), dtype=bool)
        distance = np.abs(units[:, None, :] - self._matrix[None, :, :]).max(axis=2)
        return (distance < SAME_POINT).any(axis=1)

    def near(self, unit: np.ndarray, radius: float) -> bool:
        """Whether a taken point lies within radius (max-norm) of unit."""
        if not len(self._matrix):
            return False
        return bool((np.abs(self._matrix - np.asarray(unit).reshape(1, -1)).max(axis=1) < radius).any())

    def __contains__(self, unit: np.ndarray) -> bool:
        return bool(self.mask(unit)[0])


def fill_random(space: SearchSpace, taken: Taken, rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Up to n random snapped points not taken yet (fewer only when a discrete space runs out)."""
    chosen: list[np.ndarray] = []
    for _ in range(50):
        if len(chosen) >= n:
            break
        candidates = space.sample(rng, max(64, 4 * n))
        for row in candidates:
            if len(chosen) >= n:
                break
            if row not in taken:
                taken.add(row)
                chosen.append(row)
    return chosen


class RandomSearch:
    """Random search: the baseline every other optimiser has to beat."""

    def __init__(self, space: SearchSpace, seed: int = 0) -> None:
        self.space = space
        self.seed = seed

    def suggest(
        self, n: int, observations: Sequence[Observation], pending: Sequence[Mapping[str, Any]] = ()
    ) -> list[Params]:
        taken = Taken(self.space.dim)
        taken.add(self.space.snap(self.space.encode_many([o.params for o in observations])))
        taken.add(self.space.snap(self.space.encode_many(list(pending))))
        rows = fill_random(self.space, taken, rng_for(self.seed, observations, pending), n)
        return [self.space.decode(row) for row in rows]
