"""How long `dagflow report` takes on the 4,921-node run, and whether the page opens in a browser.

The run is the fanout shape of benchmarks/local_overhead.py (41 regions x 40 trials x a 3-step chain,
plus one aggregate over all: 4,921 nodes). It is not executed: the benchmark writes its run directory
the way the local engine leaves it (plan.json, engine, a journal with a start and an end event per node,
a finish event) plus one usage record per node (8 hosts x 4 slots, with memory and CPU figures), so
that every section of the report has its full load. Then it times:

  in-process   collect the run (status, usage, metrics, verdicts) and render the HTML, in this process
  cli          `dagflow report RUN --out FILE`: the whole command, interpreter start and imports included
  chromium     headless Chromium loading the page (--dump-dom), checked for the element the page's
               script fills in after load, and a screenshot (when `chromium` is installed)

With --real the run is executed instead (`dagflow run pipeline.yaml --jobs 2`, every node `true`; a few
minutes), so the journal and usage records are whatever the local engine wrote.

    python benchmarks/report.py [--regions 41 --trials 40] [--repeat 3] [--real] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
TARGET_S = 5.0
HOSTS, SLOTS_PER_HOST = 8, 4


def make_run(root: Path, regions: int, trials: int) -> Path:
    """A finished run directory of the fanout plan with journal and usage records; returns it."""
    from local_overhead import fanout_shape

    from dagflow.plan.expand import expand
    from dagflow.run.layout import RunLayout
    from dagflow.run.usage import NodeUsage, encode_usage
    from dagflow.spec import load_spec

    shape = fanout_shape(regions, trials)
    pipeline = root / "pipeline.yaml"
    pipeline.write_text(shape.pipeline_yaml)
    plan = expand(load_spec(pipeline), run_id="bench-report")
    layout = RunLayout(root / ".dagflow" / "runs", plan.run_id)
    layout.create(plan, engine="local")
    rng = random.Random(17)
    base = time.time() - 3600
    slot_free = [base] * (HOSTS * SLOTS_PER_HOST)
    finished: dict[str, float] = {}
    journal = [json.dumps({"e": "run", "t": base, "pid": os.getpid(), "resume": False})]
    usage: list[bytes] = []
    for node in plan.nodes.values():  # topological order: a node starts once its parents ended
        ready = max((finished[parent] for parent in node.parents), default=base)
        slot = min(range(len(slot_free)), key=lambda s: max(slot_free[s], ready))
        start = max(slot_free[slot], ready)
        wall = rng.uniform(0.2, 2.0)
        end = start + wall
        slot_free[slot] = finished[node.name] = end
        journal.append(json.dumps({"e": "start", "n": node.name, "a": 1, "pid": 1000, "t": round(start, 3)}))
        journal.append(json.dumps({"e": "end", "n": node.name, "a": 1, "s": "succeeded", "rc": 0, "t": round(end, 3)}))
        host = f"node{slot // SLOTS_PER_HOST:02d}"
        usage.append(
            encode_usage(
                NodeUsage(
                    node=node.name, step=node.step, attempt=1, engine="local", started=start, ended=end,
                    wall_s=wall, cpu_s=wall * rng.uniform(0.1, 0.9), peak_memory_mb=rng.uniform(20, 600),
                    gpu_memory_peak_mb=None, gpu_utilization_pct=None, host=host,
                    slot=f"slot{slot % SLOTS_PER_HOST + 1}@{host}", requested={"cpus": 1, "memory_mb": 1024},
                    allocated={}, exit_code=0, reason=None,
                )
            )
        )  # fmt: skip
    journal.append(json.dumps({"e": "finish", "s": "succeeded", "t": max(finished.values())}))
    layout.journal_path.write_text("\n".join(journal) + "\n")
    (layout.run_dir / "usage.jsonl").write_bytes(b"".join(usage))
    return layout.run_dir


def real_run(root: Path, regions: int, trials: int) -> Path:
    """Run the fanout plan with the local engine, 2 at a time; returns its run directory."""
    from local_overhead import fanout_shape

    (root / "pipeline.yaml").write_text(fanout_shape(regions, trials).pipeline_yaml)
    dagflow = Path(sys.executable).parent / "dagflow"
    command = [str(dagflow), "run", "pipeline.yaml", "--jobs", "2", "--run-id", "bench-report"]
    subprocess.run(command, cwd=root, check=True, capture_output=True)
    return root / ".dagflow" / "runs" / "bench-report"


def time_in_process(run_dir: Path, out: Path) -> tuple[float, float]:
    from dagflow.files import write_atomic
    from dagflow.report.collect import collect_run
    from dagflow.report.html import render_run
    from dagflow.run.layout import RunLayout

    started, cpu = time.perf_counter(), time.process_time()
    text = render_run(collect_run(RunLayout.from_run_dir(run_dir), run_dir.parent.parent / "search.db"))
    write_atomic(out, text.encode("utf-8"))
    return time.perf_counter() - started, time.process_time() - cpu


def time_cli(run_dir: Path, out: Path) -> tuple[float, float]:
    dagflow = Path(sys.executable).parent / "dagflow"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([str(dagflow), "report", str(run_dir), "--out", str(out)], check=True, capture_output=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def open_in_chromium(page: Path, screenshot: Path) -> tuple[float | None, str]:
    """(seconds to load and dump the DOM, what was found); None when there is no chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return None, "chromium not installed"
    flags = [browser, "--headless", "--disable-gpu", "--no-sandbox", "--virtual-time-budget=10000"]
    started = time.perf_counter()
    dom = subprocess.run([*flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - started
    ready = 'data-ready="1"' in dom.stdout and "drawn: " in dom.stdout
    subprocess.run([*flags, "--window-size=1400,1800", f"--screenshot={screenshot}", page.as_uri()],
                   capture_output=True, timeout=300)  # fmt: skip
    shot = screenshot.stat().st_size if screenshot.exists() else 0
    return took, f"script ran: {'yes' if ready else 'NO'}; screenshot {shot} bytes"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--regions", type=int, default=41)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="Write the run and the report here and keep them.")
    parser.add_argument("--real", action="store_true", help="Execute the run instead of generating its records.")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="dagflow-bench-report-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        started = time.perf_counter()
        run_dir = (real_run if args.real else make_run)(root, args.regions, args.trials)
        made_s = time.perf_counter() - started
        usage = run_dir / "usage.jsonl"
        usage_records = len(usage.read_bytes().splitlines()) if usage.exists() else 0
        nodes = len(json.loads((run_dir / "plan.json").read_text())["nodes"])
        out = root / "report.html"
        in_process = [time_in_process(run_dir, out) for _ in range(args.repeat)]
        cli = [time_cli(run_dir, out) for _ in range(args.repeat)]
        browser_s, browser_note = open_in_chromium(out, root / "report.png")
        size = out.stat().st_size
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    how = f"executed in {made_s:.0f} s" if args.real else "not executed: journal and usage records generated"
    print(f"dagflow report: {nodes} nodes ({how}; {usage_records} usage records), "
          f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; target under {TARGET_S:g} s")  # fmt: skip
    print()
    rows = [
        ("what", "median s", "min s", "max s", "vs target", "CPU s", "note"),
        ("in-process", *_stats([w for w, _ in in_process]), _cpu(in_process), f"{size / 1e6:.2f} MB of HTML"),
        ("cli", *_stats([w for w, _ in cli]), _cpu(cli), "dagflow report RUN --out FILE"),
        ("chromium", *(_stats([browser_s]) if browser_s is not None else ("—", "—", "—", "—")), "—", browser_note),
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    print(f"\nCPU s: user + system time of the work (median), which a loaded machine does not inflate; "
          f"load average now {os.getloadavg()[0]:.1f}")  # fmt: skip
    return 0 if statistics.median(w for w, _ in cli) < TARGET_S else 1


def _cpu(samples: list[tuple[float, float]]) -> str:
    return f"{statistics.median(cpu for _, cpu in samples):.3f}"


def _stats(samples: list[float]) -> tuple[str, str, str, str]:
    median = statistics.median(samples)
    return f"{median:.3f}", f"{min(samples):.3f}", f"{max(samples):.3f}", f"{median / TARGET_S:.0%}"


if __name__ == "__main__":
    sys.exit(main())
