"""Large pipelines: load + validate + expand of 1,000- and 6,000-step pipelines, and the time to the first node
of `dagflow run` against a minimal executor starting the same first command.

The pipelines are generated the way WfCommons workflows are written for dagflow, one step per task: step
s00000 (`touch first-node`) is the only root; every other step runs `true` and needs two earlier ones, with
inputs, outputs and resources declared (22 YAML values a step; 6,000 steps are 132,000 values, 1.2 MB).

Columns:
  load+validate, expand, plan json   CPU seconds of each phase in a fresh process (`load_spec` with the local
             engine's checks as `dagflow run` calls it, `expand`, `Plan.to_json`), best of --repeat
  first node  wall seconds from starting `dagflow run PIPELINE --jobs 2 --no-cache` to the first node's file appearing
             (its mtime), and the CPU seconds dagflow had used by then (/proc), best of --repeat; the run is
             then interrupted
  floor       the same for a minimal executor: `python -c` running `touch first-node` with subprocess
  x floor     first node's wall time over the floor's
Targets (#41): the first node within 1 s of the command for 1,000 steps, within 4 s for 6,000. On a loaded
machine read the CPU columns: wall times swing with the load.

    python benchmarks/big_pipeline.py                 # 1,000 and 6,000 steps, best of 3
    python benchmarks/big_pipeline.py --steps 1000 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKER = "first-node"
FLOOR = "import subprocess, sys; subprocess.run(sys.argv[1:], check=True)"
PHASES = """\
import json, sys, time
from dagflow.engines.registry import spec_checks
from dagflow.plan.expand import expand
from dagflow.run.resources.auto import AutoResources
from dagflow.spec import load_spec
times = {}
start = time.process_time()
spec = load_spec(sys.argv[1], spec_checks("local", {}))
times["load+validate"] = time.process_time() - start
start = time.process_time()
plan = expand(spec, run_id="bench", resolve=AutoResources(spec).resolve)
times["expand"] = time.process_time() - start
start = time.process_time()
plan.to_json()
times["plan json"] = time.process_time() - start
print(json.dumps(times))
"""


def pipeline_text(steps: int) -> str:
    lines = ["name: big", "steps:"]
    for index in range(steps):
        lines.append(f"  s{index:05d}:")
        lines.append(f"    command: touch {MARKER}" if index == 0 else '    command: "true"')
        if index:
            needs = sorted({f"s{index - 1:05d}", f"s{(index - 1) // 2:05d}"})
            lines.append(f"    needs: [{', '.join(needs)}]")
            lines.append(f"    inputs: [{', '.join(f'data/{need}.out' for need in needs)}]")
        lines.append(f"    outputs: [data/s{index:05d}.out, data/s{index:05d}.log]")
        lines.append("    resources: {cpus: 1, memory: 100MB}")
    return "\n".join(lines) + "\n"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def phases(pipeline: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", PHASES, str(pipeline)], env=env(), capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"loading {pipeline} failed: {done.stderr[-3000:]}")
    return json.loads(done.stdout)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def first_node(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall seconds from starting argv to the first node's file appearing, and argv's CPU seconds by then."""
    marker = cwd / MARKER
    marker.unlink(missing_ok=True)
    start = time.time()
    process = subprocess.Popen(argv, cwd=cwd, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while not marker.exists():
        if process.poll() is not None:
            raise SystemExit(f"{' '.join(argv)} ended first: {process.stderr.read().decode()[-3000:]}")  # type: ignore[union-attr]
        time.sleep(0.001)
    cpu = cpu_seconds(process.pid) if process.poll() is None else float("nan")
    wall = marker.stat().st_mtime - start
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=600)
    return wall, cpu


def best(runs: list[tuple[float, float]]) -> tuple[float, float]:
    return min(run[0] for run in runs), min(run[1] for run in runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 6000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"best of {args.repeat}; baseline (floor): python -c running the first command with subprocess")
    print(f"{'steps':>6} {'values':>8} {'MB':>5} {'load+val':>9} {'expand':>7} {'json':>6} "
          f"{'first s':>8} {'cpu s':>6} {'floor s':>8} {'x floor':>8}")
    for steps in args.steps:
        with tempfile.TemporaryDirectory(prefix="dagflow-big-") as tmp:
            work = Path(tmp)
            pipeline = work / "pipeline.yaml"
            text = pipeline_text(steps)
            pipeline.write_text(text)
            values = 22 * steps - 8  # the root step has no needs and no inputs
            times = [phases(pipeline) for _ in range(args.repeat)]
            phase = {name: min(run[name] for run in times) for name in times[0]}
            run = [sys.executable, "-m", "dagflow", "run", str(pipeline), "--jobs", "2", "--no-cache", "--runs-dir",
                   str(work / "runs")]
            dagflow = best([first_node(run, work) for _ in range(args.repeat)])
            floor = best([first_node([sys.executable, "-c", FLOOR, "touch", MARKER], work)
                          for _ in range(args.repeat)])
        print(f"{steps:6d} {values:8,d} {len(text) / 1e6:5.2f} {phase['load+validate']:9.2f} {phase['expand']:7.2f} "
              f"{phase['plan json']:6.2f} {dagflow[0]:8.2f} {dagflow[1]:6.2f} {floor[0]:8.3f} "
              f"{dagflow[0] / floor[0]:8.1f}")


if __name__ == "__main__":
    main()
