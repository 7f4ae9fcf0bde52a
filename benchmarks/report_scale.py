"""How long `dagflow status`, `dagflow report` and `dagflow report --png` take on real finished runs of
1,000 and 10,000 nodes (#42 item 4: the PNG of a 1,000-node run within 5 s).

Each run is executed, not generated: `dagflow run pipeline.yaml --jobs 4` of a wide matrix of trivial
commands (`true`), REGIONS regions x N shards:

    fetch     one node per region                  (over: [shard])
    train     one node per region and shard         needs fetch
    evaluate  one node per region                  (over: [shard]) needs train

so 1,000 nodes are 10 regions x 98 shards (+ 20), 10,000 are 10 x 998 (+ 20). Then each command runs as
a user runs it (a fresh interpreter, output to a file), best of --repeat, with its wall time and its CPU
time (user + system of the child: what a loaded machine does not inflate). The last column says what came
out: status's step rows, the HTML's size, the PNG's size in pixels.

    python benchmarks/report_scale.py [--nodes 1000 10000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REGIONS = 10
PNG_TARGET_S = 5.0
RUN_ID = "scale"


def scale_pipeline(nodes: int, regions: int = REGIONS, fail: str | None = None) -> str:
    """The pipeline of about `nodes` nodes (fetch and evaluate per region, train per region and shard);
    fail: a train node ("r03.s042") whose command exits 1."""
    shards = max(1, (nodes - 2 * regions) // regions)
    region_values = ", ".join(f"r{index:02d}" for index in range(regions))
    shard_values = ", ".join(f"s{index:03d}" for index in range(shards))
    train = f'test "{{region}}.{{shard}}" != "{fail}"' if fail else "true"
    return (
        f"name: scale\nmatrix:\n  region: [{region_values}]\n  shard: [{shard_values}]\nsteps:\n"
        '  fetch: {command: "true", over: [shard]}\n'
        f"  train: {{command: '{train}', needs: [fetch]}}\n"
        '  evaluate: {command: "true", needs: [train], over: [shard]}\n'
    )


def dagflow_command() -> list[str]:
    return [sys.executable, "-m", "dagflow"]


def run_pipeline(root: Path, nodes: int) -> tuple[Path, float]:
    """Execute the pipeline in root; its run directory and how long the run took."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pipeline.yaml").write_text(scale_pipeline(nodes))
    started = time.perf_counter()
    command = [*dagflow_command(), "run", "pipeline.yaml", "--jobs", "4", "--run-id", RUN_ID]
    subprocess.run(command, cwd=root, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return root / ".dagflow" / "runs" / RUN_ID, time.perf_counter() - started


def timed(command: list[str], cwd: Path, out: Path) -> tuple[float, float]:
    """(wall s, CPU s) of one command, its stdout to out."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(out, "wb") as handle:
        subprocess.run(command, cwd=cwd, check=True, stdout=handle, stderr=subprocess.PIPE)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def png_size(path: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def measure(root: Path, nodes: int, repeat: int) -> list[tuple[str, ...]]:
    run_dir, ran_s = run_pipeline(root, nodes)
    total = len(json.loads((run_dir / "plan.json").read_text())["nodes"])
    html, png, text = root / "report.html", root / "report.png", root / "status.txt"
    commands = {
        "status": [*dagflow_command(), "status", RUN_ID],
        "status --json": [*dagflow_command(), "status", RUN_ID, "--json"],
        "report (HTML)": [*dagflow_command(), "report", RUN_ID, "--out", str(html)],
        "report --png": [*dagflow_command(), "report", RUN_ID, "--out", str(html), "--png", str(png)],
    }
    rows = []
    for what, command in commands.items():
        samples = [timed(command, root, text if what.startswith("status") else root / "report.out")
                   for _ in range(repeat)]  # fmt: skip
        wall, cpu = min(samples)
        if what == "status":
            note = f"{len(text.read_text().splitlines())} lines of text"
        elif what == "status --json":
            note = f"{text.stat().st_size / 1e6:.2f} MB"
        elif what == "report (HTML)":
            note = f"{html.stat().st_size / 1e6:.2f} MB of HTML"
        else:
            width, height = png_size(png)
            note = f"{width}x{height} px PNG" + ("" if wall <= PNG_TARGET_S else f"; over {PNG_TARGET_S:g} s")
        rows.append((f"{total:,}", what, f"{wall:.2f}", f"{cpu:.2f}", note))
    rows.append((f"{total:,}", "(the run)", f"{ran_s:.1f}", "—", "dagflow run --jobs 4, every node `true`"))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Keep the runs and their reports in DIR/<nodes>.")
    args = parser.parse_args(argv)
    base = args.keep or Path(tempfile.mkdtemp(prefix="dagflow-bench-report-scale-"))
    rows: list[tuple[str, ...]] = [("nodes", "command", "wall s", "CPU s", "output")]
    try:
        for nodes in args.nodes:
            rows.extend(measure(base / str(nodes), nodes, args.repeat))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    print(f"dagflow status and report on real finished runs, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"best of {args.repeat}; load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print()
    widths = [max(len(row[index]) for row in rows) for index in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
