"""Command-line start-up: `dagflow --version`, `dagflow --help` and `dagflow validate` against `python -c pass`.

Each command runs as its own process, as a user types it (the interpreter that runs this script, `-m dagflow`,
which is what the `dagflow` console script calls); the table shows the best wall time and the best CPU time
(user + system, from getrusage) of --repeat runs, what each adds over `python -c pass` and the ratio to it.
Targets (#41): --version and --help within 0.1 s of `python -c pass`; validate of examples/region-retrain
under 0.3 s. On a loaded machine read the CPU column: wall times swing with the load.

    python benchmarks/cli_startup.py                  # best of 10
    python benchmarks/cli_startup.py --repeat 30
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PIPELINE = REPO / "examples" / "region-retrain" / "pipeline.yaml"


def commands() -> dict[str, list[str]]:
    dagflow = [sys.executable, "-m", "dagflow"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "dagflow --version": [*dagflow, "--version"],
        "dagflow --help": [*dagflow, "--help"],
        "dagflow validate region-retrain": [*dagflow, "validate", str(PIPELINE)],
        "dagflow run --help": [*dagflow, "run", "--help"],
    }


def best_of(argv: list[str], repeat: int) -> tuple[float, float]:
    """The best wall and the best CPU seconds of repeat runs of argv (its output discarded)."""
    walls, cpus = [], []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="runs of each command (the best counts)")
    args = parser.parse_args()
    rows = {name: best_of(argv, args.repeat) for name, argv in commands().items()}
    base_wall, base_cpu = rows["python -c pass"]
    print(f"best of {args.repeat}; baseline: python -c pass ({sys.executable})")
    print(f"{'command':34} {'wall s':>8} {'+wall s':>8} {'x wall':>7} {'cpu s':>8} {'+cpu s':>8} {'x cpu':>7}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:34} {wall:8.3f} {wall - base_wall:8.3f} {wall / base_wall:7.1f} "
              f"{cpu:8.3f} {cpu - base_cpu:8.3f} {cpu / max(base_cpu, 1e-3):7.1f}")


if __name__ == "__main__":
    main()
