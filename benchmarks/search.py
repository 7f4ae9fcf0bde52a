"""Search engines on Branin and Hartmann6: regret after 20 and 40 evaluations, over seeds.

Rows (all in one run, same problems, same seeds):

  dagflow gp        dagflow's default engine (GP + log EI), one trial at a time
  dagflow gp b4/b8  the same engine in synchronous batches of 4 / 8: a batch is suggested whole (each
                    point with the batch's others as pending), then evaluated whole
  dagflow gp a8     asynchronous, 8 in flight, as a scheduler with `parallel: 8` runs: whenever the
                    oldest running trial finishes, one new point is suggested with the other 7 pending
  random            dagflow's random search, the baseline
  optuna tpe        Optuna's TPESampler (multivariate), if optuna is installed
  optuna gp         Optuna's GPSampler, if optuna and torch are installed (the `gp-optuna` extra)
  gpyopt ei         GPyOpt's EI, if it installs and runs: it is run in benchmarks/.venv-gpyopt (made on
                    first use with pip; GPyOpt is unmaintained and wants old packages of its own)
  botorch / b8      BoTorch's qLogNoisyExpectedImprovement with its default GP and optimiser settings, one
                    at a time and in batches of 8, from the same Sobol design as dagflow: a reference for
                    what a current batch engine achieves. Opt-in (`--only botorch`, about 6 minutes on 2
                    cores; needs `pip install botorch`), because it is slow.

  noisy / constrained  Spearmint-style problems (`--only noisy,constrained`, also in the default run), in a
                    table of their own, dagflow gp one trial at a time:
    branin+noise    Branin plus Gaussian noise (sd 10) under a GAUSSIAN likelihood; regret = the TRUE value of
                    the point the search reports (lowest posterior mean) - 0.397887. The "lowest draw" row
                    reports the lowest noisy observation instead, as a likelihood-blind search does.
    constrained     Branin subject to x1 + x2 >= 14 (a CONSTRAINT task, feasible where >= 0), which cuts
                    off all three of Branin's minima; regret = the best feasible value found - the
                    constrained minimum (computed once, by SLSQP from a grid of starts).

Regret = best value found so far - the known minimum (Branin 0.397887, Hartmann6 -3.32237). The table
gives the median and the interquartile range over the seeds. It also times one dagflow suggestion
with 200 observations in the Hartmann6 space.

    python benchmarks/search.py              # 10 seeds (about 2.5 minutes on 2 cores)
    python benchmarks/search.py --seeds 80 --only gp,random   # a wider sample: about 6 minutes
    python benchmarks/search.py --quick      # 3 seeds, a smoke run
    python benchmarks/search.py --only gp,random --problems branin
    python benchmarks/search.py --only gp,botorch   # dagflow against BoTorch, one at a time and in batches
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import venv  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

# dagflow is imported inside the functions that use it: the GPyOpt worker runs this file in a venv
# that has only GPyOpt's own packages.

GPYOPT_VENV = HERE / ".venv-gpyopt"
GPYOPT_PACKAGES = ["GPyOpt", "GPy", "numpy", "scipy", "matplotlib"]


# --- problems ---------------------------------------------------------------------------------------


def branin(x: Sequence[float]) -> float:
    x1, x2 = x
    b, c, t = 5.1 / (4 * math.pi**2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


_H6_A = np.array([
    [10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14],
])
_H6_P = 1e-4 * np.array([
    [1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
    [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381],
])
_H6_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])


def hartmann6(x: Sequence[float]) -> float:
    z = np.asarray(x, dtype=float)
    return float(-np.sum(_H6_ALPHA * np.exp(-np.sum(_H6_A * (z - _H6_P) ** 2, axis=1))))


@dataclass(frozen=True)
class Problem:
    name: str
    function: Callable[[Sequence[float]], float]
    bounds: list[tuple[float, float]]
    minimum: float

    def space(self) -> Any:
        from dagflow.search import SearchSpace
        from dagflow.spec.model import VariableSpec

        return SearchSpace({
            f"x{i}": VariableSpec(type="FLOAT", min=low, max=high) for i, (low, high) in enumerate(self.bounds)
        })

    def evaluate(self, params: dict[str, Any]) -> float:
        return self.function([float(params[f"x{i}"]) for i in range(len(self.bounds))])


PROBLEMS = {
    "branin": Problem("branin", branin, [(-5.0, 10.0), (0.0, 15.0)], 0.397887),
    "hartmann6": Problem("hartmann6", hartmann6, [(0.0, 1.0)] * 6, -3.32237),
}

# row label -> (engine, trials at once, synchronous batches or asynchronous)
CONFIGS: dict[str, tuple[str, int, str]] = {
    "dagflow gp": ("gp", 1, "sync"),
    "dagflow gp b4": ("gp", 4, "sync"),
    "dagflow gp b8": ("gp", 8, "sync"),
    "dagflow gp a8": ("gp", 8, "async"),
    "random": ("random", 1, "sync"),
    "optuna tpe": ("tpe-optuna", 1, "sync"),
    "optuna gp": ("gp-optuna", 1, "sync"),
    "gpyopt ei": ("gpyopt", 1, "sync"),
    "botorch": ("botorch", 1, "sync"),
    "botorch b8": ("botorch", 8, "sync"),
}
# Spearmint-style rows (their own problems and table): label -> (kind, likelihood)
SPEARMINT_ROWS: dict[str, tuple[str, str | None]] = {
    "gp noisy": ("noisy", "GAUSSIAN"),
    "gp noisy, lowest draw": ("noisy", None),
    "gp constrained": ("constrained", None),
    "random constrained": ("constrained", "random"),
}
NOISE_SD = 10.0
CONSTRAINT_SUM = 14.0
# Engines left out of the default run: named in --only, they run.
OPT_IN = {"botorch"}
# Rows that run the same engine as "dagflow gp" with trials in flight: the batch target compares them
# with it.
BATCH_ROWS = {"dagflow gp b4", "dagflow gp b8", "dagflow gp a8"}


# --- runs ------------------------------------------------------------------------------------------


def run_dagflow(problem_name: str, engine: str, batch: int, seed: int, budget: int, mode: str = "sync") -> list[float]:
    """Values in the order they finished."""
    from dagflow.search import Observation, make_optimizer

    problem = PROBLEMS[problem_name]
    optimizer = make_optimizer(problem.space(), engine, seed=seed)
    observations: list[Observation] = []
    if mode == "async":
        running = optimizer.suggest(batch, observations, [])
        while running:
            point = running.pop(0)  # trials take equally long: the oldest finishes first
            observations.append(Observation(point, problem.evaluate(point)))
            if len(observations) + len(running) < budget:
                running += optimizer.suggest(1, observations, running)
    else:
        while len(observations) < budget:
            points = optimizer.suggest(min(batch, budget - len(observations)), observations, [])
            for point in points:
                observations.append(Observation(point, problem.evaluate(point)))
    return [float(o.value) for o in observations]  # type: ignore[arg-type]


def constraint(x: Sequence[float]) -> float:
    return float(x[0] + x[1] - CONSTRAINT_SUM)


def constrained_minimum() -> float:
    from scipy.optimize import minimize

    best = math.inf
    for x1 in np.linspace(-5, 10, 7):
        for x2 in np.linspace(0, 15, 7):
            result = minimize(
                branin, [x1, x2], method="SLSQP", bounds=PROBLEMS["branin"].bounds,
                constraints=[{"type": "ineq", "fun": constraint}],
            )  # fmt: skip
            if result.success and constraint(result.x) >= -1e-9:
                best = min(best, float(result.fun))
    return best


def run_spearmint_row(label: str, seed: int, budget: int) -> list[float]:
    """Regret after each evaluation of the point the search would report at that moment."""
    from dagflow.search import Observation, make_optimizer
    from dagflow.search.gp_ei import recommend

    kind, setting = SPEARMINT_ROWS[label]
    problem = PROBLEMS["branin"]
    space = problem.space()
    rng = np.random.default_rng(seed + 1000)
    engine = "random" if setting == "random" else "gp"
    likelihood = setting if setting == "GAUSSIAN" else None
    constraints = {"c": None} if kind == "constrained" else None
    optimizer = make_optimizer(space, engine, seed=seed, likelihood=likelihood, constraints=constraints)
    minimum = constrained_minimum() if kind == "constrained" else problem.minimum
    observations: list[Observation] = []
    regret: list[float] = []
    while len(observations) < budget:
        for point in optimizer.suggest(1, observations, []):
            x = [float(point[f"x{i}"]) for i in range(2)]
            value = branin(x) + (rng.normal(0.0, NOISE_SD) if kind == "noisy" else 0.0)
            outputs = {"c": constraint(x)} if kind == "constrained" else None
            observations.append(Observation(point, value, outputs))
            chosen = recommend(space, observations, likelihood, seed)
            if chosen is None:
                regret.append(math.inf)
            else:
                regret.append(problem.evaluate(dict(observations[chosen].params)) - minimum)
    return regret


def spearmint_table(labels: list[str], seeds: list[int], budget: int, workers: int) -> None:
    at = [20, budget]
    jobs = [(label, seed, budget) for label in labels for seed in seeds]
    with ProcessPoolExecutor(workers) as pool:
        outcomes = list(pool.map(_spearmint_job, jobs))
    print(f"\nSpearmint-style rows: regret of the reported best after {at[0]} and {at[1]} evaluations, "
          f"median [25%, 75%] over {len(seeds)} seeds (inf: no feasible point yet)")
    for label in labels:
        runs = [regret for (row, _, _), regret in zip(jobs, outcomes, strict=True) if row == label]
        cells = [f"{_fmt([run[k - 1] for run in runs]):>31}" for k in at]
        print(f"{label:<24}" + "".join(cells))


def _spearmint_job(args: tuple[str, int, int]) -> list[float]:
    return run_spearmint_row(*args)


def run_gpyopt(problem_name: str, seed: int, budget: int) -> list[float]:
    """Runs inside benchmarks/.venv-gpyopt (see main's --gpyopt-worker)."""
    import GPyOpt  # type: ignore[import-not-found]

    problem = PROBLEMS[problem_name]
    np.random.seed(seed)
    domain = [
        {"name": f"x{i}", "type": "continuous", "domain": bounds} for i, bounds in enumerate(problem.bounds)
    ]
    values: list[float] = []

    def f(x: np.ndarray) -> np.ndarray:
        out = np.array([[problem.function(row)] for row in x])
        values.extend(float(v) for v in out[:, 0])
        return out

    initial = max(5, min(10, len(problem.bounds) + 1))
    bo = GPyOpt.methods.BayesianOptimization(
        f=f, domain=domain, acquisition_type="EI", initial_design_numdata=initial, exact_feval=True
    )
    bo.run_optimization(max_iter=budget - initial)
    return values[:budget]


def run_botorch(problem_name: str, batch: int, seed: int, budget: int) -> list[float]:
    """BoTorch's documented loop: SingleTaskGP with standardised outcomes, fitted by marginal likelihood,
    and qLogNEI optimised jointly over the batch; minimisation as maximisation of the negated loss."""
    import torch
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Standardize
    from botorch.optim import optimize_acqf
    from gpytorch.mlls import ExactMarginalLogLikelihood
    from scipy.stats import qmc

    from dagflow.search.gp_ei import GPEI

    # BoTorch warns on every acquisition restart that L-BFGS-B stopped early; it retries by itself.
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    problem = PROBLEMS[problem_name]
    low, high = np.array(problem.bounds).T
    dim = len(low)

    def evaluate(unit: np.ndarray) -> list[float]:
        return [problem.function(low + row * (high - low)) for row in unit]

    # dagflow's design: the same scrambled Sobol points, as many as its first batch would get.
    design_size = max(GPEI(problem.space()).initial, batch)
    x = qmc.Sobol(dim, scramble=True, seed=seed).random_base2(int(np.ceil(np.log2(design_size))))[:design_size]
    y = evaluate(x)
    cube = torch.tensor([[0.0] * dim, [1.0] * dim], dtype=torch.double)
    while len(y) < budget:
        train_x = torch.tensor(x, dtype=torch.double)
        model = SingleTaskGP(train_x, -torch.tensor(y, dtype=torch.double)[:, None], outcome_transform=Standardize(m=1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        acquisition = qLogNoisyExpectedImprovement(model, train_x, prune_baseline=True)
        points, _ = optimize_acqf(
            acquisition, bounds=cube, q=min(batch, budget - len(y)), num_restarts=10, raw_samples=512
        )
        new = points.detach().numpy()
        x = np.vstack([x, new])
        y += evaluate(new)
    return y


def regrets(values: list[float], minimum: float, at: Sequence[int]) -> list[float]:
    best = np.minimum.accumulate(np.asarray(values))
    return [float(best[min(k, len(best)) - 1] - minimum) for k in at]


def _job(args: tuple[str, str, int, int]) -> tuple[str, str, int, list[float] | str]:
    label, problem_name, seed, budget = args
    engine, batch, mode = CONFIGS[label]
    try:
        if engine == "botorch":
            return label, problem_name, seed, run_botorch(problem_name, batch, seed, budget)
        return label, problem_name, seed, run_dagflow(problem_name, engine, batch, seed, budget, mode)
    except Exception as error:  # a broken optional engine becomes a note, not a crash
        return label, problem_name, seed, f"{type(error).__name__}: {error}"


def gpyopt_python(given: str | None) -> tuple[Path | None, str]:
    python = Path(given) if given else GPYOPT_VENV / "bin" / "python"
    if not python.exists() and not given:
        print("creating benchmarks/.venv-gpyopt for GPyOpt ...", file=sys.stderr)
        venv.create(GPYOPT_VENV, with_pip=True)
        result = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *GPYOPT_PACKAGES], capture_output=True, text=True
        )
        if result.returncode:
            return None, "pip install failed: " + result.stderr.strip().splitlines()[-1]
    return python, ""


def _gpyopt_job(args: tuple[str, str, int, int]) -> list[float] | str:
    python, problem_name, seed, budget = args
    result = subprocess.run(
        [python, __file__, "--gpyopt-worker", problem_name, str(seed), str(budget)], capture_output=True, text=True
    )
    if result.returncode:
        return (result.stderr.strip().splitlines() or ["failed"])[-1]
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_gpyopt_all(
    problems: list[str], seeds: list[int], budget: int, python_path: str | None, workers: int
) -> dict[tuple[str, int], list[float] | str]:
    python, why = gpyopt_python(python_path)
    keys = [(p, s) for p in problems for s in seeds]
    if python is None:
        return dict.fromkeys(keys, why)
    with ProcessPoolExecutor(workers) as pool:
        outcomes = pool.map(_gpyopt_job, [(str(python), p, s, budget) for p, s in keys])
        return dict(zip(keys, outcomes, strict=True))


def time_suggestion(observed: int = 200, repeats: int = 3) -> float:
    from dagflow.search import Observation, make_optimizer

    problem = PROBLEMS["hartmann6"]
    rng = np.random.default_rng(0)
    space = problem.space()
    observations = []
    for row in rng.random((observed, space.dim)):
        params = space.decode(row)
        observations.append(Observation(params, problem.evaluate(params)))
    optimizer = make_optimizer(space, "gp", seed=0)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        optimizer.suggest(1, observations)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _fmt(values: list[float]) -> str:
    q1, median, q3 = np.percentile(values, [25, 50, 75])
    return f"{median:9.2e} [{q1:8.1e}, {q3:8.1e}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 seeds: a smoke run")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds (default 10, 3 with --quick)")
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--only", default=None, help="comma-separated row labels' engines, e.g. gp,random,gpyopt")
    parser.add_argument("--problems", default="branin,hartmann6")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--gpyopt-python", default=None, help="a Python with GPyOpt (default: benchmarks/.venv-gpyopt)")
    parser.add_argument("--gpyopt-worker", nargs=3, metavar=("PROBLEM", "SEED", "BUDGET"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.gpyopt_worker:
        problem_name, seed, budget = args.gpyopt_worker
        print(json.dumps(run_gpyopt(problem_name, int(seed), int(budget))))
        return 0

    seeds = list(range(args.seeds or (3 if args.quick else 10)))
    problems = args.problems.split(",")
    wanted = set(args.only.split(",")) if args.only else None
    labels = [
        label for label, (engine, _, _) in CONFIGS.items()
        if (engine in wanted if wanted is not None else engine not in OPT_IN)
    ]
    spearmint_labels = [
        label for label, (kind, _) in SPEARMINT_ROWS.items() if wanted is None or kind in wanted
    ]
    at = [20, args.budget]

    if spearmint_labels:
        spearmint_table(spearmint_labels, seeds, args.budget, args.jobs)
    if not labels:
        return 0
    results: dict[tuple[str, str], list[list[float]]] = {}
    notes: dict[str, str] = {}
    elapsed: dict[str, float] = {}
    jobs = [(label, p, s, args.budget) for label in labels if label != "gpyopt ei" for p in problems for s in seeds]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        for label, problem_name, _seed, outcome in pool.map(_job, jobs):
            if isinstance(outcome, str):
                notes[label] = outcome
            else:
                results.setdefault((label, problem_name), []).append(outcome)
    elapsed["pool"] = time.perf_counter() - started
    if "gpyopt ei" in labels:
        for (problem_name, _seed), outcome in run_gpyopt_all(
            problems, seeds, args.budget, args.gpyopt_python, args.jobs
        ).items():
            if isinstance(outcome, str):
                notes["gpyopt ei"] = outcome
            else:
                results.setdefault(("gpyopt ei", problem_name), []).append(outcome)

    print(f"\nregret after {at[0]} and {at[1]} evaluations: median [25%, 75%] over {len(seeds)} seeds")
    header = f"{'engine':<15}" + "".join(
        f"{p + ' @' + str(k):>31}" for p in problems for k in at
    )
    print(header)
    print("-" * len(header))
    for label in labels:
        cells = []
        for problem_name in problems:
            runs = results.get((label, problem_name))
            for index in range(len(at)):
                if not runs:
                    cells.append(f"{'n/a':>31}")
                    continue
                minimum = PROBLEMS[problem_name].minimum
                cells.append(f"{_fmt([regrets(values, minimum, at)[index] for values in runs]):>31}")
        print(f"{label:<15}" + "".join(cells))
    def median_at_budget(label: str, problem_name: str) -> float:
        runs = results.get((label, problem_name))
        minimum = PROBLEMS[problem_name].minimum
        return float(np.median([regrets(v, minimum, at)[1] for v in runs])) if runs else math.nan

    def ratios(title: str, pairs: list[tuple[str, str]]) -> None:
        pairs = [(label, base) for label, base in pairs if any((base, p) in results for p in problems)]
        if not pairs:
            return
        print(f"\nmedian regret @{at[1]} {title}")
        for label, base in pairs:
            cells = [
                f"{p} {median_at_budget(label, p) / median_at_budget(base, p):9.1e}" for p in problems
            ]
            print(f"{label:<15}" + "   ".join(cells))

    ratios("as a fraction of random search's (the baseline; lower is better)", [(label, "random") for label in labels])
    ratios(
        "as a multiple of the same engine's, one trial at a time (the issue's batch target: <= 3)",
        [(label, "dagflow gp") for label in labels if label in BATCH_ROWS]
        + [(label, "botorch") for label in labels if label == "botorch b8"],
    )
    for label, note in notes.items():
        print(f"note: {label}: {note}")
    print(f"\none dagflow gp suggestion with 200 observations (Hartmann6 space): {time_suggestion():.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
