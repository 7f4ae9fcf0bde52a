"""Random search: the baseline every other optimiser has to beat."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagflow.search.optimizer import Observation, Taken, fill_random, rng_for
from dagflow.search.space import Params, SearchSpace


class RandomSearch:
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
