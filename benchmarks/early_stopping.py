"""Early stopping (median, ASHA) against the same search without it, on synthetic learning curves.

A trial at x in [0, 1]^2 trains for R epochs; its loss after epoch t is

    y_t = f(x) + a(x) * t^-0.7 + noise,   f(x) = (x1 - 0.3)^2 + (x2 - 0.7)^2,

with a(x) in [0.5, 1.5] varying smoothly over x (some trials start worse and catch up), and Gaussian
noise (sd 0.02) on every intermediate value. A completed trial's final value is its true y_R;
regret is measured from the lowest y_R over a fine grid.
The search is simulated the way `dagflow search run` drives it, one poll per epoch: P trials train at
once, each epoch costs one time unit, after every epoch the rule (dagflow.search.early_stopping's
MedianRule / AshaRule, the scheduler's own) may stop running trials, and free slots get new points from
the optimiser, which sees a stopped trial's last value as its result. Two budgets: `--budget N` trials
(stopped ones included, as the scheduler counts them), and the default, the compute of N full trials
(N * R epochs): new trials start while fewer epochs than that have been trained, so a search that stops
trials early runs more of them in the same compute.

Reported, median and interquartile range over seeds: time (epochs of wall clock with P slots) and total
epochs trained until a completed trial's final value is within `--target` of the optimum, how many
seeds reach it within the budget, total epochs for the whole budget, and the regret of the best
completed trial at the end.

    python benchmarks/early_stopping.py                 # 20 seeds, random search (seconds)
    python benchmarks/early_stopping.py --quick         # 5 seeds
    python benchmarks/early_stopping.py --only none,asha --optimizer gp --seeds 5
    python benchmarks/early_stopping.py --per-trial     # the same number of trials instead
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dagflow.search import Observation, SearchSpace, make_optimizer
from dagflow.search.early_stopping import AshaRule, MedianRule, Rule
from dagflow.spec.model import VariableSpec

EPOCHS = 27
NOISE_SD = 0.02

RULES: dict[str, Callable[[], Rule | None]] = {
    "none": lambda: None,
    "median": lambda: MedianRule(min_steps=3, min_trials=3),
    "asha": lambda: AshaRule(min_steps=1, min_trials=3, factor=3, max_steps=EPOCHS),
}


def final_true(x: np.ndarray) -> float:
    return float((x[0] - 0.3) ** 2 + (x[1] - 0.7) ** 2)


def scale(x: np.ndarray) -> float:
    return float(1.0 + 0.5 * math.sin(6.0 * x[0] + 4.0 * x[1]))


def true_curve(x: np.ndarray, step: int) -> float:
    return final_true(x) + scale(x) * step**-0.7


def grid_optimum(points: int = 401) -> float:
    """The lowest final value over a fine grid: what a completed trial's regret is measured from."""
    axis = np.linspace(0, 1, points)
    x1, x2 = np.meshgrid(axis, axis)
    values = (x1 - 0.3) ** 2 + (x2 - 0.7) ** 2 + (1.0 + 0.5 * np.sin(6.0 * x1 + 4.0 * x2)) * EPOCHS**-0.7
    return float(values.min())


OPTIMUM = grid_optimum()


@dataclass
class Running:
    number: int
    params: dict[str, float]
    curve: dict[int, float] = field(default_factory=dict)


@dataclass
class Outcome:
    time_to_target: float | None
    epochs_to_target: float | None
    total_epochs: int
    final_regret: float
    trials: int
    stopped: int


def simulate(
    rule_name: str, seed: int, budget: int, parallel: int, target: float, optimizer_name: str, per_trial: bool
) -> Outcome:
    space = SearchSpace({name: VariableSpec(type="FLOAT", min=0, max=1) for name in ("x1", "x2")})
    optimizer = make_optimizer(space, optimizer_name, seed=seed)
    rule = RULES[rule_name]()
    noise = np.random.default_rng([seed, 99])
    running: list[Running] = []
    ended: dict[int, dict[int, float]] = {}
    observations: list[Observation] = []
    best_final = math.inf
    clock = epochs = submitted = stopped = 0
    reached: tuple[float, float] | None = None
    while True:
        if per_trial:
            wanted = min(parallel - len(running), budget - submitted)
        else:
            wanted = parallel - len(running) if epochs < budget * EPOCHS else 0
        if wanted > 0:
            for params in optimizer.suggest(wanted, observations, [trial.params for trial in running]):
                submitted += 1
                running.append(Running(submitted, params))
        if not running:
            break
        clock += 1
        for trial in running:  # one epoch each
            epochs += 1
            step = len(trial.curve) + 1
            x = np.array([trial.params["x1"], trial.params["x2"]])
            trial.curve[step] = true_curve(x, step) + float(noise.normal(0, NOISE_SD))
        for trial in [t for t in running if len(t.curve) == EPOCHS]:
            x = np.array([trial.params["x1"], trial.params["x2"]])
            value = true_curve(x, EPOCHS)
            trial.curve[EPOCHS] = value  # the final line: the true value
            best_final = min(best_final, value)
            observations.append(Observation(trial.params, value))
            ended[trial.number] = trial.curve
            running.remove(trial)
            if reached is None and best_final - OPTIMUM <= target:
                reached = (clock, epochs)
        if rule is not None:
            losses = {**ended, **{t.number: t.curve for t in running}}
            for trial in list(running):
                if rule.judge(trial.number, losses) is not None:
                    last = trial.curve[max(trial.curve)]
                    observations.append(Observation(trial.params, last))  # the last value stands in
                    ended[trial.number] = trial.curve
                    running.remove(trial)
                    stopped += 1
    return Outcome(
        time_to_target=reached[0] if reached else None,
        epochs_to_target=reached[1] if reached else None,
        total_epochs=epochs,
        final_regret=best_final - OPTIMUM,
        trials=submitted,
        stopped=stopped,
    )


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    q1, mid, q3 = np.percentile(values, [25, 50, 75])
    return f"{mid:.4g} [{q1:.4g}, {q3:.4g}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="5 seeds")
    parser.add_argument("--budget", type=int, default=60, help="trials per search, or their compute (below)")
    parser.add_argument(
        "--per-trial", action="store_true", help="the budget counts trials, not the epochs of that many full trials"
    )
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--target", type=float, default=0.01, help="regret of a completed trial to reach")
    parser.add_argument("--optimizer", default="random", help="random (default) or gp")
    parser.add_argument("--only", default=None, help="comma-separated rules: none, median, asha")
    args = parser.parse_args(argv)
    seeds = 5 if args.quick else args.seeds
    names = args.only.split(",") if args.only else list(RULES)
    unknown = [name for name in names if name not in RULES]
    if unknown:
        print(f"--only: unknown rule {', '.join(unknown)}; choose from {', '.join(RULES)}", file=sys.stderr)
        return 2
    print(
        f"{seeds} seeds, budget {args.budget} {'trials' if args.per_trial else 'trials of compute'} of {EPOCHS} "
        f"epochs, parallel {args.parallel}, "
        f"optimiser {args.optimizer}, target regret {args.target}; median [IQR]"
    )
    header = ("rule", "time to target", "epochs to target", "reached", "epochs (budget)", "final regret", "trials",
              "stopped")
    rows = [header]
    for name in names:
        outcomes = [
            simulate(name, seed, args.budget, args.parallel, args.target, args.optimizer, args.per_trial)
            for seed in range(seeds)
        ]
        hits = [o for o in outcomes if o.time_to_target is not None]
        rows.append((
            name,
            spread([o.time_to_target for o in hits if o.time_to_target is not None]),
            spread([o.epochs_to_target for o in hits if o.epochs_to_target is not None]),
            f"{len(hits)}/{seeds}",
            spread([float(o.total_epochs) for o in outcomes]),
            spread([o.final_regret for o in outcomes]),
            spread([float(o.trials) for o in outcomes]),
            spread([float(o.stopped) for o in outcomes]),
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
