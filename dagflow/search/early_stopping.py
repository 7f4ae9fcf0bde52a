"""Early stopping: which running trials to stop, from every trial's intermediate metrics (progress.py).

Two rules, as Katib, Optuna and Ray Tune offer them; both compare losses (the metric, negated when the
goal is maximize), so lower is better:

- median: a running trial whose latest step s >= min_steps is stopped when its best loss so far is
  worse than the median of the other trials' losses at step s (Optuna's MedianPruner). When fewer than
  min_trials other trials reported s, the latest step of its own that enough of them reported is used.
- asha (asynchronous successive halving, Li et al. 2020; Ray Tune's ASHAScheduler): rungs at steps
  min_steps * reduction_factor^k (below max_steps). A trial reaching a rung is compared with every
  other trial that reached it (running, stopped or finished), by its best loss up to the rung; it goes
  on when it is in the top 1/reduction_factor of them, and is stopped otherwise. With fewer than
  min_trials others at the rung it goes on. A trial is judged once per rung.

Every trial's curve is re-read from its run directory's files, so the rules need no state of their
own that a restart would lose; ASHA's record of the rungs a running trial passed is rebuilt on restart
as "every rung below the one it reached" (a scheduler would have stopped it at those otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from statistics import median
from typing import Protocol

from dagflow.search.progress import Curve, ProgressReader, StreamedFile, mean_curve
from dagflow.spec.model import EarlyStoppingSpec

DEFAULT_REDUCTION_FACTOR = 3.0


@dataclass(frozen=True, slots=True)
class StopDecision:
    step: int  # the trial's latest reported step
    value: float  # the metric at that step: the trial's value as a stopped trial
    reason: str


class Rule(Protocol):
    def judge(self, key: Hashable, losses: Mapping[Hashable, Curve]) -> str | None:
        """Why trial `key` should stop, or None; `losses` holds every trial's curve, its own included."""
        ...

    def resume(self, key: Hashable, curve: Curve) -> None:
        """A trial found running when the scheduler (re)started, with the curve it has reported so far."""
        ...


def best_up_to(curve: Curve, step: int) -> float | None:
    values = [value for at, value in curve.items() if at <= step]
    return min(values) if values else None


def quantile(values: list[float], q: float) -> float:
    """Linear-interpolated quantile (numpy's default method)."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class MedianRule:
    def __init__(self, min_steps: int, min_trials: int) -> None:
        self.min_steps = min_steps
        self.min_trials = min_trials

    def judge(self, key: Hashable, losses: Mapping[Hashable, Curve]) -> str | None:
        mine = losses[key]
        best = min(mine.values()) if mine else None
        for step in sorted((s for s in mine if s >= self.min_steps), reverse=True):
            others = [curve[step] for other, curve in losses.items() if other != key and step in curve]
            if len(others) >= self.min_trials:
                middle = median(others)
                if best is not None and best > middle:
                    return f"median rule at step {step}: best so far {best:.6g} is worse than the median {middle:.6g}"
                return None
        return None

    def resume(self, key: Hashable, curve: Curve) -> None:
        return None


class AshaRule:
    def __init__(self, min_steps: int, min_trials: int, factor: float, max_steps: int | None) -> None:
        self.min_steps = min_steps
        self.min_trials = min_trials
        self.factor = factor
        self.max_steps = max_steps
        self._passed: dict[Hashable, int] = {}  # trial -> how many rungs it was kept at

    def rungs(self, up_to: int) -> list[int]:
        found: list[int] = []
        k = 0
        while True:
            rung = math.ceil(self.min_steps * self.factor**k - 1e-9)
            if rung > up_to or (self.max_steps is not None and rung >= self.max_steps):
                return found
            if not found or rung > found[-1]:
                found.append(rung)
            k += 1

    def judge(self, key: Hashable, losses: Mapping[Hashable, Curve]) -> str | None:
        mine = losses[key]
        if not mine:
            return None
        for index, rung in enumerate(self.rungs(max(mine))):
            if index < self._passed.get(key, 0):
                continue
            value = best_up_to(mine, rung)
            others = [
                at_rung
                for other, curve in losses.items()
                if other != key and curve and max(curve) >= rung and (at_rung := best_up_to(curve, rung)) is not None
            ]
            if value is not None and len(others) >= self.min_trials:
                cutoff = quantile(others, 1 / self.factor)
                if value > cutoff:
                    return (
                        f"asha rung {index} (step {rung}): {value:.6g} is not in the top 1/{self.factor:g} "
                        f"of {len(others) + 1} trials (cutoff {cutoff:.6g})"
                    )
            self._passed[key] = index + 1
        return None

    def resume(self, key: Hashable, curve: Curve) -> None:
        if curve:
            self._passed[key] = max(len(self.rungs(max(curve))) - 1, 0)


def make_rule(spec: EarlyStoppingSpec) -> Rule:
    if spec.rule == "median":
        return MedianRule(spec.min_steps, spec.min_trials)
    factor = spec.reduction_factor or DEFAULT_REDUCTION_FACTOR
    return AshaRule(spec.min_steps, spec.min_trials, factor, spec.max_steps)


class EarlyStopper:
    """Reads trials' curves as the scheduler polls and says which running trials to stop.

    `files_of(run_id)` names a trial's progress files (its objective nodes' metrics files, or where its
    engine streams their lines: progress.py StreamedFile); every
    curve is in the metric's units, turned into losses (`to_loss`) for the rule.
    """

    def __init__(
        self,
        spec: EarlyStoppingSpec,
        metric: str,
        to_loss: Callable[[float], float],
        files_of: Callable[[str], list[Path | StreamedFile]],
    ) -> None:
        self.rule = make_rule(spec)
        self.to_loss = to_loss
        self.files_of = files_of
        self._reader = ProgressReader(metric)
        self._files: dict[str, list[Path | StreamedFile]] = {}
        self._final: dict[str, Curve] = {}  # curves of ended trials: they no longer change

    def curve(self, run_id: str, ended: bool = False) -> Curve:
        if run_id in self._final:
            return self._final[run_id]
        files = self._files.get(run_id) or self.files_of(run_id)
        if files:  # a plan not readable yet names none: ask again next time
            self._files[run_id] = files
        curve = mean_curve([self._reader.curve(path) for path in files])
        if ended:
            self._final[run_id] = curve
            for path in self._files.pop(run_id, files):
                self._reader.forget(path)
        return curve

    def resume(self, run_id: str) -> None:
        self.rule.resume(run_id, self._losses(self.curve(run_id)))

    def decide(self, running: list[str], ended: list[str]) -> dict[str, StopDecision]:
        """The running trials (by run id) to stop, compared with each other and with the ended ones."""
        curves = {run_id: self.curve(run_id) for run_id in running}
        curves.update({run_id: self.curve(run_id, ended=True) for run_id in ended})
        losses = {run_id: self._losses(curve) for run_id, curve in curves.items()}
        decisions: dict[str, StopDecision] = {}
        for run_id in running:
            reason = self.rule.judge(run_id, losses) if curves[run_id] else None
            if reason is not None:
                last = max(curves[run_id])
                decisions[run_id] = StopDecision(last, curves[run_id][last], reason)
        return decisions

    def _losses(self, curve: Curve) -> Curve:
        return {step: self.to_loss(value) for step, value in curve.items()}
