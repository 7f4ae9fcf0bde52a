"""The one best of a search (per region): what the scheduler's last line, `dagflow search status` (and its
--json), `dagflow report --search`, the convergence plot and Spearmint's best_job_and_result.txt all show.

`reported_best` decides it, and every one of those calls it:
- only a feasible trial can be the best: a succeeded trial whose constraint values are all >= 0 and whose
  objective was a number (a NaN objective is HIPS Spearmint's infeasible point: store.nan_objective);
- without a noise model, or under NOISELESS, the one with the lowest loss (the earliest on a tie);
- under GAUSSIAN, the one with the lowest posterior mean (gp_ei.recommend: a noisy search's lowest draw
  is mostly luck), shown with that posterior mean and its observed value. The GP is fitted to the same
  observations with the same seed wherever it is asked, so the scheduler and a later `search status`
  pick the same trial. Stopped trials inform the model but are not candidates: the best ran to its end.

The search's space, which the posterior needs, is kept in the database's config (trials.config_of:
"space"); a search recorded before it was kept there falls back to the lowest loss.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dagflow.search.optimizer import Observation, loss
from dagflow.search.store import FAILED, STOPPED, SUCCEEDED, Trial, best_trial, nan_objective

if TYPE_CHECKING:
    from dagflow.search.space import SearchSpace


@dataclass(frozen=True, slots=True)
class Best:
    trial: Trial
    posterior_mean: float | None = None  # GAUSSIAN: the model's value at the trial's point, in the metric's units


def reported_best(
    trials: Sequence[Trial], likelihood: str | None, space: SearchSpace | None, goal: str = "minimize"
) -> Best | None:
    """The region's best (see the module's docstring); None while no trial is feasible."""
    if likelihood != "GAUSSIAN" or space is None:
        best = best_trial(trials)
        return None if best is None else Best(best)
    from dagflow.search.gp_ei import recommend_with_mean

    done = [trial for trial in trials if trial.state in (SUCCEEDED, FAILED)]
    chosen = recommend_with_mean(space, observations(done), likelihood)
    if chosen is None:
        return None
    index, mean = chosen
    return Best(done[index], None if mean is None else loss(mean, goal))  # loss() is its own inverse


def observations(trials: Sequence[Trial]) -> list[Observation]:
    """What the optimiser learns from the finished trials: loss (None for a failure, NaN for a NaN objective)
    and constraint values. A trial stopped early counts with its last intermediate loss, standing in for the
    final one."""
    return [
        Observation(trial.params, _loss_of(trial), trial.outputs)
        for trial in trials
        if trial.state in (SUCCEEDED, FAILED, STOPPED)
    ]


def _loss_of(trial: Trial) -> float | None:
    if nan_objective(trial):
        return math.nan
    return trial.loss if trial.state in (SUCCEEDED, STOPPED) else None


def space_of(config: Mapping[str, Any]) -> SearchSpace | None:
    """The search's space from its recorded config; None where it was not recorded (or no longer reads)."""
    specs = config.get("space")
    if not isinstance(specs, dict) or not specs:
        return None
    from pydantic import ValidationError

    from dagflow.search.space import SearchSpace
    from dagflow.spec.model import VariableSpec

    try:
        return SearchSpace({str(name): VariableSpec.model_validate(spec) for name, spec in specs.items()})
    except (ValidationError, ValueError, TypeError):
        return None


def best_info(best: Best | None) -> dict[str, Any] | None:
    """The best as plain data (search status --json's "best"): trial, observed value, params, and the
    posterior mean where the GP chose it."""
    if best is None:
        return None
    info: dict[str, Any] = {"trial": best.trial.number, "value": best.trial.value, "params": best.trial.params}
    if best.posterior_mean is not None:
        info["posterior_mean"] = best.posterior_mean
    return info


def best_text(metric: str, value: float | None, number: int, posterior_mean: float | None) -> str:
    """How every text names the best: `value=0.41 at t7`, with `(posterior mean 0.39)` under GAUSSIAN."""
    observed = "?" if value is None else f"{value:.6g}"
    mean = f" (posterior mean {posterior_mean:.6g})" if posterior_mean is not None else ""
    return f"{metric}={observed} at t{number}{mean}"
