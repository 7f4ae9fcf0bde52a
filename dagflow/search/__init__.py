"""Bayesian hyperparameter search: search spaces, optimisers, and Spearmint compatibility.

space = SearchSpace(search_spec.variables)
optimizer = make_optimizer(space, "gp", seed=0)
batch = optimizer.suggest(4, observations, pending)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from dagflow.lazy import lazy_exports

if TYPE_CHECKING:
    from dagflow.search.optimizer import Observation, Optimizer, loss
    from dagflow.search.space import Params, SearchSpace

# Imported on first use: `dagflow` commands that never search (run, status...) must not pay for numpy.
_EXPORTS = {
    "Observation": "optimizer",
    "Optimizer": "optimizer",
    "loss": "optimizer",
    "Params": "space",
    "SearchSpace": "space",
}

OPTIMIZERS = ("gp", "random", "gp-optuna", "tpe-optuna")  # search.optimizer: how a search picks points


def make_optimizer(
    space: SearchSpace,
    name: str = "gp",
    seed: int = 0,
    likelihood: str | None = None,
    constraints: Mapping[str, str | None] | None = None,
    budget: int | None = None,
    failures_spend_budget: bool = True,
) -> Optimizer:
    """An optimiser by name: gp (default), random, or the optional Optuna ones (gp-optuna, tpe-optuna).
    Only gp models a likelihood (GAUSSIAN, NOISELESS) and constraints, and uses the budget (the trials the
    search runs in all; failed ones spend it unless failures_spend_budget is False) to spend its last
    points refining the best one; the others ignore them."""
    if name == "gp":
        from dagflow.search.gp_ei import GPEI

        return GPEI(
            space, seed=seed, likelihood=likelihood, constraints=constraints, budget=budget,
            failures_spend_budget=failures_spend_budget,
        )  # fmt: skip
    if name == "random":
        from dagflow.search.optimizer import RandomSearch

        return RandomSearch(space, seed=seed)
    if name in ("gp-optuna", "tpe-optuna"):
        try:
            import optuna  # noqa: F401
        except ImportError as error:  # depends on the installed extras
            raise ValueError(f"optimiser {name!r} needs Optuna: pip install 'dagflow[gp-optuna]'") from error
        from dagflow.search.optuna_optimizer import OptunaOptimizer

        return OptunaOptimizer(space, seed=seed, sampler=name.split("-")[0])
    raise ValueError(f"unknown optimiser {name!r}; choose one of {', '.join(OPTIMIZERS)}")


__all__ = ["OPTIMIZERS", "Observation", "Optimizer", "Params", "SearchSpace", "loss", "make_optimizer"]
__getattr__ = lazy_exports(__name__, _EXPORTS)
