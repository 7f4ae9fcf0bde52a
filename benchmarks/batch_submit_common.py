"""What the batch engines' submission benchmarks (slurm_submit.py, sge_submit.py) share: the plan's shape,
starting the test cluster, timing one mode, and the table. Each benchmark names its engine in a BatchBench.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dagflow.engines.batch.engine import BatchEngine  # noqa: E402
from dagflow.engines.registry import run_session  # noqa: E402
from dagflow.plan.expand import expand  # noqa: E402
from dagflow.spec import load_spec  # noqa: E402


@dataclass(frozen=True, slots=True)
class BatchBench:
    """One batch engine, as its benchmark drives it."""

    engine: BatchEngine
    poll_s: float  # how often waiting for the run's end asks the scheduler
    waits_by_default: bool  # True: `--no-wait` measures submission only; False: `--wait` runs the plan too

    @property
    def cluster(self) -> Path:
        """The test cluster's script: status, up, down, env."""
        return REPO / "scripts" / f"{self.engine.name}-cluster.sh"


def pipeline_yaml(name: str, regions: int, trials: int) -> str:
    region_values = ", ".join(f"r{i:02d}" for i in range(regions))
    trial_values = ", ".join(f"t{i:02d}" for i in range(trials))
    return f"""name: {name}-bench
matrix:
  region: [{region_values}]
  trial: [{trial_values}]
steps:
  a: {{command: "true", resources: {{memory: 64MB}}}}
  b: {{command: "true", needs: [a], resources: {{memory: 64MB}}}}
  c: {{command: "true", needs: [b], resources: {{memory: 64MB}}}}
  aggregate: {{command: "true", needs: [c], over: [region, trial], resources: {{memory: 64MB}}}}
"""


@dataclass(slots=True)
class Result:
    mode: str
    nodes: int
    jobs: int
    submit_s: float
    total_s: float | None
    state: str

    @property
    def nodes_per_s(self) -> float:
        return self.nodes / self.submit_s


def run_mode(bench: BatchBench, mode: str, workdir: Path, wait: bool) -> Result:
    plan = expand(load_spec(workdir / "pipeline.yaml"))
    runs_dir = workdir / ".dagflow" / "runs"
    t0 = time.perf_counter()
    bench.engine.arrays = mode == "arrays"
    layout, work = run_session(bench.engine).start(plan, runs_dir)
    bench.engine.launch(layout, work)
    submitted = bench.engine.last
    assert submitted is not None
    submit_s = time.perf_counter() - t0
    total_s = None
    if wait:
        status = bench.engine.wait_run(submitted.layout, poll_s=bench.poll_s)
        total_s = time.perf_counter() - t0
        state = status.state
    else:
        state = bench.engine.cancel_run(submitted.layout).state
    return Result(mode, submitted.nodes, len(submitted.jobs), submit_s, total_s, state)


def cluster_up(bench: BatchBench) -> bool:
    """Start the test cluster if nothing answers, and take its client settings; True if this call started it."""
    started = False
    if subprocess.run([str(bench.cluster), "status"], capture_output=True, check=False).returncode != 0:
        subprocess.run([str(bench.cluster), "up"], check=True)
        started = True
    out = subprocess.run([str(bench.cluster), "env"], capture_output=True, text=True, check=True).stdout
    for word in shlex.split(out)[1:]:  # `export NAME=value ...`; settings already made stay
        os.environ.setdefault(*word.split("=", 1))
    return started


def main(bench: BatchBench, doc: str | None) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regions", type=int, default=41)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--modes", default="arrays,per-node", help="comma-separated: arrays, per-node")
    if bench.waits_by_default:
        parser.add_argument("--no-wait", dest="wait", action="store_false", help="measure submission only")
    else:
        parser.add_argument("--wait", action="store_true", help="also run the plan to its end (else cancel it)")
    args = parser.parse_args()

    started = cluster_up(bench)
    results = []
    try:
        for mode in args.modes.split(","):
            with tempfile.TemporaryDirectory(prefix=f"dagflow-{bench.engine.name}-bench-") as tmp:
                workdir = Path(tmp)
                (workdir / "pipeline.yaml").write_text(pipeline_yaml(bench.engine.name, args.regions, args.trials))
                results.append(run_mode(bench, mode, workdir, wait=args.wait))
    finally:
        if started:
            subprocess.run([str(bench.cluster), "down"], check=False)

    baseline = next((r for r in results if r.mode == "per-node"), None)
    print(
        f"{'mode':<9} {'nodes':>6} {'jobs':>5} {'submit s':>9} {'nodes/s':>9} {'vs per-node':>12} "
        f"{'total s':>8} {'state':<10}"
    )
    for r in results:
        ratio = f"{r.nodes_per_s / baseline.nodes_per_s:.1f}x" if baseline else "-"
        total = f"{r.total_s:.1f}" if r.total_s is not None else "-"
        print(
            f"{r.mode:<9} {r.nodes:>6} {r.jobs:>5} {r.submit_s:>9.2f} {r.nodes_per_s:>9.0f} {ratio:>12} "
            f"{total:>8} {r.state:<10}"
        )
    return 0 if all(r.state in ("succeeded", "interrupted") for r in results) else 1
