"""Search turnaround: `dagflow search run` of N trivial trials against the same optimiser in process.

The problem is BBOB's Rosenbrock in 2-D (f8, unshifted), evaluated by a one-line objective.py that
writes its metrics file: a trial's own work is one Python start-up. Rows:

  in-process   the scheduler's optimiser (the gp optimiser, same seed, same budget, same space), driven
               one trial at a time by a program of its own (this file with --as-program, a fresh
               interpreter): suggest one point, run `python objective.py` on it as a plain process
               (subprocess.run), read its metrics file, repeat. "optimiser" is the time in suggest,
               "processes" the time in the N plain processes; their sum is the baseline the issue names.
               "program" is that program's whole process as this file sees it: the same two plus the
               interpreter's start and the optimiser's imports (numpy, scipy: about 1 s), which a search
               pays too.
  dagflow run  one `dagflow run pipeline.yaml` of the trial pipeline (params at their defaults): what a
               trial would cost if it cost one CLI run of its pipeline.
  search       `dagflow search run pipeline.yaml --parallel 1` on the local engine, the whole command.
               Its points are checked against the in-process ones (the same points, in order).

The ratios are search / (optimiser + processes), the issue's (#41: target <= 1.5), and search / program,
both sides whole processes. "per trial" is what the search spends per trial beyond the baseline's.

    python benchmarks/search_turnaround.py               # 40 trials
    python benchmarks/search_turnaround.py --trials 8    # a quick run
    python benchmarks/search_turnaround.py --repeat 3    # best of 3
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OBJECTIVE = """import json, sys
x0, x1 = float(sys.argv[2]), float(sys.argv[3])
with open(sys.argv[1], "w") as out:
    json.dump({"loss": 100 * (x1 - x0 ** 2) ** 2 + (1 - x0) ** 2}, out)
"""

PIPELINE = """name: turnaround
params: {{x0: 0.0, x1: 0.0}}
steps:
  evaluate:
    kind: evaluate
    command: {python} objective.py out/{{run.id}}.json {{params.x0}} {{params.x1}}
    metrics: out/{{run.id}}.json
search:
  objective: {{metric: loss, goal: minimize}}
  variables: {{x0: {{type: FLOAT, min: -5, max: 5}}, x1: {{type: FLOAT, min: -5, max: 5}}}}
  budget: {trials}
  parallel: 1
  optimizer: gp
"""


@dataclass
class Times:
    optimiser_s: float
    processes_s: float
    points: list[dict[str, Any]]

    @property
    def total_s(self) -> float:
        return self.optimiser_s + self.processes_s


def write_problem(work: Path, trials: int) -> None:
    (work / "objective.py").write_text(OBJECTIVE)
    (work / "pipeline.yaml").write_text(PIPELINE.format(python=sys.executable, trials=trials))
    (work / "out").mkdir(exist_ok=True)


def in_process(work: Path, trials: int, seed: int) -> Times:
    """The scheduler's optimiser, made as the scheduler makes it, with plain processes as the trials."""
    from dagflow.search import Observation, loss, make_optimizer
    from dagflow.search.trials import PipelineTrials, noise_models
    from dagflow.spec import load_spec

    source = PipelineTrials(load_spec(work / "pipeline.yaml"))
    likelihood, constraints = noise_models(source)
    optimiser = make_optimizer(
        source.space, source.optimizer, seed=seed, likelihood=likelihood, constraints=constraints,
        budget=trials, failures_spend_budget=source.counts_failures,
    )  # fmt: skip
    observations: list[Observation] = []
    points: list[dict[str, Any]] = []
    suggest_s = process_s = 0.0
    for number in range(1, trials + 1):
        start = time.perf_counter()
        (point,) = optimiser.suggest(1, observations, [])
        suggest_s += time.perf_counter() - start
        out = work / "out" / f"plain-{number}.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, "objective.py", str(out), str(point["x0"]), str(point["x1"])], cwd=work,
                       check=True)  # fmt: skip
        value = json.loads(out.read_text())["loss"]
        process_s += time.perf_counter() - start
        observations.append(Observation(point, loss(value, source.goal)))
        points.append(point)
    return Times(suggest_s, process_s, points)


def as_program(work: Path, trials: int, seed: int) -> tuple[float, Times]:
    """in_process in a fresh interpreter: (its whole process's wall seconds, what it measured inside)."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, __file__, "--as-program", str(work), "--trials", str(trials),
                             "--seed", str(seed)], capture_output=True, text=True)  # fmt: skip
    elapsed = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"the in-process program exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return elapsed, Times(**json.loads(result.stdout))


def dagflow(work: Path, *args: str) -> float:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=work, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode:
        raise SystemExit(f"dagflow {' '.join(args)} exited {result.returncode}:\n{result.stdout}{result.stderr}")
    return elapsed


def search(work: Path, seed: int) -> tuple[float, list[dict[str, Any]]]:
    from dagflow.search.store import SearchStore

    elapsed = dagflow(work, "search", "run", "pipeline.yaml", "--seed", str(seed), "--db", "search.db",
                      "--runs-dir", "runs")  # fmt: skip
    store = SearchStore(work / "search.db")
    try:
        trials = sorted(store.trials("turnaround"), key=lambda trial: trial.number)
    finally:
        store.close()
    return elapsed, [trial.params for trial in trials]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40, help="trials (the search's budget) [40]")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each row; the best is shown [1]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--as-program", type=Path, metavar="WORKDIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_program is not None:  # the in-process row's own process: what it measured, as JSON
        times = in_process(args.as_program, args.trials, args.seed)
        print(json.dumps({"optimiser_s": times.optimiser_s, "processes_s": times.processes_s, "points": times.points}))
        return

    best: dict[str, float] = {}
    same = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="dagflow-turnaround-") as directory:
            work = Path(directory)
            write_problem(work, args.trials)
            program, base = as_program(work, args.trials, args.seed)
            one_run = dagflow(work, "run", "pipeline.yaml", "--runs-dir", "single-runs", "--no-cache")
            wall, points = search(work, args.seed)
        same = sum(1 for ours, theirs in zip(points, base.points, strict=False) if ours == theirs)
        for key, value in (("optimiser", base.optimiser_s), ("processes", base.processes_s),
                           ("baseline", base.total_s), ("program", program), ("dagflow run", one_run),
                           ("search", wall)):  # fmt: skip
            best[key] = min(best.get(key, value), value)

    n = args.trials
    rows = [
        ("in-process optimiser", best["optimiser"], ""),
        (f"{n} plain processes", best["processes"], ""),
        ("baseline (the two)", best["baseline"], "1.00x"),
        ("in-process program", best["program"], ""),
        ("one `dagflow run`", best["dagflow run"], ""),
        ("dagflow search run", best["search"], f"{best['search'] / best['baseline']:.2f}x"),
    ]
    print(f"search turnaround: {n} trials, parallel 1, local engine, gp, seed {args.seed} "
          f"(best of {args.repeat})")  # fmt: skip
    print(f"{'row':<24}{'wall s':>9}{'per trial s':>13}{'ratio':>8}")
    for label, seconds, ratio in rows:
        per = f"{seconds / n:.3f}" if label != "one `dagflow run`" else f"{seconds:.3f}"
        print(f"{label:<24}{seconds:>9.2f}{per:>13}{ratio:>8}")
    extra = (best["search"] - best["baseline"]) / n
    print(f"search overhead per trial beyond the baseline: {extra:.3f} s; target ratio <= 1.5")
    print(f"search / in-process program (both whole processes): {best['search'] / best['program']:.2f}x")
    print(f"same points as in process: {same} of {n}")


if __name__ == "__main__":
    main()
