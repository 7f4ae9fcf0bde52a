"""Client CPU of `dagflow submit` against `condor_submit_dag` of the same DAG, for a 150-node pipeline
(#41 item 3; target: dagflow's at most 4x condor_submit_dag's, or under 0.3 s).

Needs the one-machine test pool (`scripts/condor-pool.sh up`); exits 2 when it is not up. Started as root,
it runs itself again as the pool user, as benchmarks/condor_submit.py does (whose helpers it uses).

Each round, alternating the two tools:
- dagflow: `python -m dagflow submit pipeline.yaml --json` (the whole process: interpreter start, imports,
  compile, the pre-queue check, htcondor2.Submit.from_dag and the schedd submit);
- condor_submit_dag: `dagflow compile pipeline.yaml -o DIR` beforehand (not counted), then
  `condor_submit_dag DIR/bench.dag`.
Each dagflow round submits into a runs directory of its own, so that no earlier run is checked for
liveness (`admit_new` reads each run's status: a cost that grows with the runs kept, measured apart).
The CPU counted is user + system time of the command and every process it waited for (os.wait4's rusage:
condor_submit_dag's condor_submit, dagflow's condor_status and condor_submit -dry-run). The DAGMan job is
removed after each submit.

    python benchmarks/condor_submit_cpu.py [--rounds 5] [--nodes 150]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from condor_submit import STATE, BenchmarkError, condor_cluster, dagflow_cluster, on_pool, remove_and_drain, run

NAME = "bench"
TARGET_RATIO = 4.0
TARGET_CPU_S = 0.3


def pipeline(nodes: int) -> str:
    """One step over `nodes` shards, 16 MB and 1 MB each (never run long: the DAG is removed at once)."""
    shards = ", ".join(f"s{index:03d}" for index in range(nodes))
    return (f"name: {NAME}\nmatrix:\n  shard: [{shards}]\nsteps:\n  work:\n    command: sh -c \"sleep 1\"\n"
            "    resources: {memory: 16MB, disk: 1MB}\n")  # fmt: skip


def cpu_of(argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(client CPU s, wall s, stdout) of argv: its rusage and its waited-for descendants' (os.wait4)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read()
        if process.returncode != 0:
            raise BenchmarkError(f"`{' '.join(argv)}` exited {process.returncode}:\n{stdout}{err.read()}")
    return usage.ru_utime + usage.ru_stime, wall, stdout


def benchmark(rounds: int, nodes: int) -> None:
    workdir = STATE / "work" / f"bench-submit-cpu-{os.getpid()}-{time.monotonic_ns()}"
    workdir.mkdir(parents=True)
    (workdir / "pipeline.yaml").write_text(pipeline(nodes))
    samples: dict[str, list[tuple[float, float]]] = {"dagflow submit": [], "condor_submit_dag": []}
    for index in range(1, rounds + 1):
        argv = [sys.executable, "-m", "dagflow", "submit", "pipeline.yaml", "--json", "--run-id", f"df-{index}",
                "--runs-dir", f"runs-{index}"]  # fmt: skip
        cpu, wall, stdout = cpu_of(argv, workdir)
        remove_and_drain(dagflow_cluster(stdout), workdir)
        samples["dagflow submit"].append((cpu, wall))
        out = workdir / f"csd-{index}"
        run([sys.executable, "-m", "dagflow", "compile", "pipeline.yaml", "-o", str(out)], cwd=workdir)
        cpu, wall, stdout = cpu_of(["condor_submit_dag", str(out / f"{NAME}.dag")], workdir)
        remove_and_drain(condor_cluster(stdout), workdir)
        samples["condor_submit_dag"].append((cpu, wall))
        print(f"round {index}: dagflow {samples['dagflow submit'][-1][0]:.3f} CPU-s, condor_submit_dag "
              f"{cpu:.3f} CPU-s", file=sys.stderr)  # fmt: skip
    print(f"client CPU of a {nodes}-node pipeline's submit, best / median of {rounds} (wall, best)")
    print(f"{'tool':<20}{'CPU best':>12}{'CPU median':>12}{'wall best':>12}")
    best = {}
    for tool, rows in samples.items():
        cpus = [cpu for cpu, _ in rows]
        best[tool] = min(cpus)
        print(f"{tool:<20}{min(cpus):>10.3f} s{statistics.median(cpus):>10.3f} s{min(w for _, w in rows):>10.2f} s")
    ratio = best["dagflow submit"] / max(best["condor_submit_dag"], 1e-6)
    print(f"{'ratio (best)':<20}{ratio:>11.2f}x")
    met = ratio <= TARGET_RATIO or best["dagflow submit"] < TARGET_CPU_S
    print(f"target: ratio <= {TARGET_RATIO:.0f}x or dagflow under {TARGET_CPU_S} CPU-s: {'met' if met else 'NOT met'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=150)
    args = parser.parse_args()
    return on_pool(__file__, lambda: benchmark(args.rounds, args.nodes))


if __name__ == "__main__":
    sys.exit(main())
