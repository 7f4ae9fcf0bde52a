"""Grid Engine engine submission speed: how fast a 4,921-node plan becomes qsub jobs, and how long it runs.

The shape of benchmarks/slurm_submit.py: 41 regions x 40 trials x a 3-step chain (a -> b -> c), plus one
aggregate over all of them; every node runs `true`, so the times are orchestration only. Modes:

  arrays    what the engine does: one job array per step (`-t 1-1640`), chained with -hold_jid_ad, the
            aggregate -hold_jid on the last array (4 qsub calls)
  per-node  one qsub per node with a -hold_jid list (the fallback for wiring an array cannot express);
            the baseline the ratio column divides by

Needs a running cluster (SGE_ROOT etc. set, or scripts/sge-cluster.sh up, which this starts if nothing
answers and stops again at the end). Time to completion depends on how fast sge_execd starts jobs on this
machine (and its slots), not on dagflow.

    python benchmarks/sge_submit.py                      # both modes, full shape, submission only
    python benchmarks/sge_submit.py --wait --modes arrays --regions 4 --trials 5
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

from dagflow.engines.sge import cancel_sge, submit_sge, wait_sge  # noqa: E402
from dagflow.plan.expand import expand  # noqa: E402
from dagflow.spec import load_spec  # noqa: E402

CLUSTER = REPO / "scripts" / "sge-cluster.sh"


def pipeline_yaml(regions: int, trials: int) -> str:
    region_values = ", ".join(f"r{i:02d}" for i in range(regions))
    trial_values = ", ".join(f"t{i:02d}" for i in range(trials))
    return f"""name: sge-bench
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


def run_mode(mode: str, workdir: Path, wait: bool) -> Result:
    plan = expand(load_spec(workdir / "pipeline.yaml"))
    runs_dir = workdir / ".dagflow" / "runs"
    t0 = time.perf_counter()
    submitted = submit_sge(plan, runs_dir, arrays=mode == "arrays")
    submit_s = time.perf_counter() - t0
    total_s = None
    if wait:
        status = wait_sge(submitted.layout, poll_s=1.0)
        total_s = time.perf_counter() - t0
        state = status.state
    else:
        state = cancel_sge(submitted.layout.run_id, runs_dir).state
    return Result(mode, submitted.nodes, len(submitted.jobs), submit_s, total_s, state)


def cluster_up() -> bool:
    """Start the test cluster if nothing answers, and take its client settings; True if this call started it."""
    started = False
    if subprocess.run([str(CLUSTER), "status"], capture_output=True, check=False).returncode != 0:
        subprocess.run([str(CLUSTER), "up"], check=True)
        started = True
    if "SGE_ROOT" not in os.environ:
        out = subprocess.run([str(CLUSTER), "env"], capture_output=True, text=True, check=True).stdout
        os.environ.update(word.split("=", 1) for word in shlex.split(out)[1:])
    return started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regions", type=int, default=41)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--modes", default="arrays,per-node", help="comma-separated: arrays, per-node")
    parser.add_argument("--wait", action="store_true", help="also run the plan to its end (else cancel it)")
    args = parser.parse_args()

    started = cluster_up()
    results = []
    try:
        for mode in args.modes.split(","):
            with tempfile.TemporaryDirectory(prefix="dagflow-sge-bench-") as tmp:
                workdir = Path(tmp)
                (workdir / "pipeline.yaml").write_text(pipeline_yaml(args.regions, args.trials))
                results.append(run_mode(mode, workdir, wait=args.wait))
    finally:
        if started:
            subprocess.run([str(CLUSTER), "down"], check=False)

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


if __name__ == "__main__":
    raise SystemExit(main())
