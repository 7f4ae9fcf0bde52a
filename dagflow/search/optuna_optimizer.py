"""Optuna's samplers behind dagflow's optimiser contract (optional: `pip install dagflow[gp-optuna]`).

Each call rebuilds an in-memory study from the history: finished trials as COMPLETE (or FAIL),
pending points as RUNNING trials, which Optuna's GPSampler and TPE's constant liar account for.
A variable of size k becomes k Optuna parameters named NAME[0] .. NAME[k-1].
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from dagflow.search.optimizer import Observation, rng_for, single_threaded
from dagflow.search.space import Params, SearchSpace, Variable


def _names(variable: Variable) -> list[str]:
    return [variable.name] if variable.size == 1 else [f"{variable.name}[{i}]" for i in range(variable.size)]


class OptunaOptimizer:
    def __init__(self, space: SearchSpace, seed: int = 0, sampler: str = "gp") -> None:
        import optuna

        if sampler not in ("gp", "tpe"):
            raise ValueError(f"unknown Optuna sampler {sampler!r} (gp or tpe)")
        optuna.logging.set_verbosity(logging.WARNING)
        self.space = space
        self.seed = seed
        self.sampler = sampler
        self._distributions: dict[str, Any] = {}
        for variable in space.variables:
            for name in _names(variable):
                self._distributions[name] = self._distribution(variable)

    def _distribution(self, variable: Variable) -> Any:
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

        spec = self.space.specs[variable.name]
        if variable.type == "ENUM":
            return CategoricalDistribution(list(variable.options))
        if variable.type == "INT":
            return IntDistribution(variable.int_min, variable.int_max, log=variable.log)
        assert spec.min is not None and spec.max is not None
        return FloatDistribution(spec.min, spec.max, log=variable.log)

    def _flatten(self, params: Mapping[str, Any]) -> dict[str, Any]:
        flat: dict[str, Any] = {}
        for variable in self.space.variables:
            value = params[variable.name]
            values = list(value) if variable.size > 1 else [value]
            flat.update(zip(_names(variable), values, strict=True))
        return flat

    def _unflatten(self, flat: Mapping[str, Any]) -> Params:
        params: Params = {}
        for variable in self.space.variables:
            values = [flat[name] for name in _names(variable)]
            params[variable.name] = values[0] if variable.size == 1 else values
        return params

    def suggest(
        self, n: int, observations: Sequence[Observation], pending: Sequence[Mapping[str, Any]] = ()
    ) -> list[Params]:
        import optuna
        from optuna.trial import TrialState, create_trial

        seed = int(rng_for(self.seed, observations, pending).integers(2**31))
        sampler: optuna.samplers.BaseSampler
        if self.sampler == "gp":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                sampler = optuna.samplers.GPSampler(seed=seed, deterministic_objective=True)
        else:
            sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True)
        study = optuna.create_study(sampler=sampler)
        for observation in observations:
            flat = self._flatten(observation.params)
            if observation.failed:
                trial = create_trial(params=flat, distributions=self._distributions, state=TrialState.FAIL)
            else:
                trial = create_trial(params=flat, distributions=self._distributions, value=observation.value)
            study.add_trial(trial)
        for point in pending:
            study.add_trial(
                create_trial(params=self._flatten(point), distributions=self._distributions, state=TrialState.RUNNING)
            )
        out: list[Params] = []
        with single_threaded():
            for _ in range(n):
                trial = study.ask(self._distributions)
                out.append(self._unflatten(trial.params))
        return out
