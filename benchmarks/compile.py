"""Benchmark: pipeline.yaml -> DAGMan files, dagflow's whole path against htcondor2.dags' writer.

    python benchmarks/compile.py [--regions 41] [--trials 1000]

Builds a pipeline of REGIONS x TRIALS x 3 steps (fetch -> train on a GPU -> evaluate) plus a report
gathered over regions (one per trial): 124,000 nodes by default. Each side runs in its own fresh
subprocess so peak RSS (ru_maxrss) is its own:

  dagflow         YAML load + validate (load_spec) + expand + compile_plan (the .dag and .sub files), in
                  the shared data mode, whose VARS are the ones the htcondor2.dags side writes
                  (`--data-mode transfer` adds each node's transfer_input_files list, which that side lacks)
  htcondor2.dags  the same graph and VARS, built as an htcondor2.dags.DAG and written by write_dag

Targets: dagflow within 1.2x of htcondor2.dags' time, and under 400 MB peak. "process" is the whole
worker process as its parent times it (interpreter start, imports, the work, exit), its CPU from the
parent's RUSAGE_CHILDREN: the whole-process target is 1.5x the htcondor2.dags writer process.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TIME_RATIO_TARGET = 1.2
PROCESS_RATIO_TARGET = 1.5
PEAK_MB_TARGET = 400


def pipeline_yaml(regions: int, trials: int) -> str:
    region_values = ", ".join(f"r{i:02d}" for i in range(regions))
    trial_values = ", ".join(f'"{i}"' for i in range(trials))
    return f"""\
name: bench
matrix:
  region: [{region_values}]
  trial: [{trial_values}]
params: {{lr: 0.01, hidden: 128}}
steps:
  fetch:
    kind: transfer
    from: s3://ratings/{{region}}/latest/
    to: data/{{region}}/
  train:
    kind: train
    needs: [fetch]
    command: >-
      python train.py --data data/{{region}} --lr {{params.lr}} --trial {{trial}}
      --out models/{{region}}/{{trial}}
    resources: {{gpus: 1, gpu_memory: 16GB, memory: 8GB, cpus: 4}}
    requirements: CUDACapability >= 7.0
    classads: {{DagflowTeam: recs}}
    retries: 2
    env: {{OMP_NUM_THREADS: "4"}}
  evaluate:
    kind: evaluate
    needs: [train]
    command: python eval.py models/{{region}}/{{trial}} --out models/{{region}}/{{trial}}/metrics.json
  report:
    kind: evaluate
    needs: [evaluate]
    over: [region]
    command: python report.py models --trial {{trial}}
"""


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_dagflow(pipeline: Path, out: Path, data_mode: str) -> dict[str, float]:
    from dagflow.engines.condor.compile import compile_plan
    from dagflow.engines.registry import spec_checks
    from dagflow.plan.expand import expand
    from dagflow.spec import load_spec

    base = peak_mb()
    cpu = time.process_time()
    start = time.perf_counter()
    spec = load_spec(pipeline, spec_checks())
    loaded = time.perf_counter()
    plan = expand(spec, run_id="bench")
    expanded = time.perf_counter()
    compile_plan(plan, out, data_mode=data_mode)
    written = time.perf_counter()
    return {
        "cpu": time.process_time() - cpu,
        "nodes": len(plan.nodes),
        "load": loaded - start,
        "expand": expanded - loaded,
        "write": written - expanded,
        "total": written - start,
        "base_mb": base,
        "peak_mb": peak_mb(),
    }


def run_htcondor_dags(regions: int, trials: int, out: Path) -> dict[str, float]:
    import htcondor2
    from htcondor2 import dags

    base = peak_mb()
    # Node order is trial-major so each report node's 41 parents are one contiguous Grouper chunk.
    coords = [(f"r{r:02d}", str(t)) for t in range(trials) for r in range(regions)]

    def args(*argv: str) -> str:
        return " ".join("'" + a + "'" for a in argv)

    fetch_vars = [
        {
            "DagflowArgs": args("dagflow", "transfer", f"s3://ratings/{r}/latest/", f"data/{r}/"),
            "DagflowEnv": "",
            "DagflowRegion": f'"{r}"',
            "DagflowTrial": f'"{t}"',
        }
        for r, t in coords
    ]
    train_vars = [
        {
            "DagflowArgs": args(
                "python", "train.py", "--data", f"data/{r}", "--lr", "0.01", "--trial", t, "--out", f"models/{r}/{t}"
            ),
            "DagflowEnv": "OMP_NUM_THREADS='4'",
            "DagflowRegion": f'"{r}"',
            "DagflowTrial": f'"{t}"',
        }
        for r, t in coords
    ]
    eval_vars = [
        {
            "DagflowArgs": args("python", "eval.py", f"models/{r}/{t}", "--out", f"models/{r}/{t}/metrics.json"),
            "DagflowEnv": "",
            "DagflowRegion": f'"{r}"',
            "DagflowTrial": f'"{t}"',
        }
        for r, t in coords
    ]
    report_vars = [
        {
            "DagflowArgs": args("python", "report.py", "models", "--trial", str(t)),
            "DagflowEnv": "",
            "DagflowTrial": f'"{t}"',
        }
        for t in range(trials)
    ]

    def submit(gpu: bool) -> htcondor2.Submit:
        text = 'executable = /usr/bin/env\narguments = "$(DagflowArgs)"\nenvironment = "$(DagflowEnv)"\n'
        text += "request_gpus = 1\nrequirements = (HAS_GPU =?= true)\n" if gpu else ""
        return htcondor2.Submit(text)

    cpu = time.process_time()
    start = time.perf_counter()
    dag = dags.DAG(
        max_jobs_by_category={"gpu": 16},
        node_status_file=dags.NodeStatusFile(out / "bench.status"),
        jobstate_log=out / "bench.jobstate.log",
        dot_config=dags.DotConfig(out / "bench.dot"),
    )
    fetch = dag.layer(name="fetch", submit_description=submit(False), vars=fetch_vars, retries=0)
    train = fetch.child_layer(
        name="train", submit_description=submit(True), vars=train_vars, retries=2, category="gpu", edge=dags.OneToOne()
    )
    evaluate = train.child_layer(
        name="evaluate", submit_description=submit(False), vars=eval_vars, edge=dags.OneToOne()
    )
    evaluate.child_layer(
        name="report",
        submit_description=submit(False),
        vars=report_vars,
        edge=dags.Grouper(parent_chunk_size=regions, child_chunk_size=1),
    )
    built = time.perf_counter()
    dags.write_dag(dag, out, dag_file_name="bench.dag")
    written = time.perf_counter()
    return {
        "cpu": time.process_time() - cpu,
        "nodes": len(coords) * 3 + trials,
        "load": 0.0,
        "expand": built - start,
        "write": written - built,
        "total": written - start,
        "base_mb": base,
        "peak_mb": peak_mb(),
    }


def worker(which: str, work: Path, regions: int, trials: int, data_mode: str) -> None:
    out = work / which
    out.mkdir(parents=True, exist_ok=True)
    if which == "dagflow":
        result = run_dagflow(work / "pipeline.yaml", out, data_mode)
    else:
        result = run_htcondor_dags(regions, trials, out)
    result["dag_mb"] = sum(p.stat().st_size for p in out.glob("*.dag")) / 1e6
    print(json.dumps(result))


def measure(which: str, work: Path, regions: int, trials: int, data_mode: str) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        which,
        "--work",
        str(work),
        "--regions",
        str(regions),
        "--trials",
        str(trials),
        "--data-mode",
        data_mode,
    ]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process"] = wall
    result["process_cpu"] = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--regions", type=int, default=41)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds, alternating the two sides; each side's fastest counts"
    )
    parser.add_argument("--data-mode", choices=["shared", "transfer"], default="shared", help="dagflow's data mode")
    parser.add_argument("--worker", choices=["dagflow", "htcondor2.dags"], help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.worker:
        worker(options.worker, options.work, options.regions, options.trials, options.data_mode)
        return
    with tempfile.TemporaryDirectory(prefix="dagflow-bench-") as tmp:
        work = Path(tmp)
        (work / "pipeline.yaml").write_text(pipeline_yaml(options.regions, options.trials))
        # alternating rounds so both sides see the same machine load; the fastest run of each counts
        rounds = [
            (measure("dagflow", work, options.regions, options.trials, options.data_mode),
             measure("htcondor2.dags", work, options.regions, options.trials, options.data_mode))
            for _ in range(max(1, options.repeat))
        ]  # fmt: skip
        ours = min((mine for mine, _ in rounds), key=lambda row: row["total"])
        theirs = min((other for _, other in rounds), key=lambda row: row["total"])
    ratio = ours["total"] / theirs["total"]
    process_ours = min(mine["process"] for mine, _ in rounds)
    process_theirs = min(other["process"] for _, other in rounds)
    process_ratio = process_ours / process_theirs
    process_cpu_ratio = min(mine["process_cpu"] for mine, _ in rounds) / min(
        other["process_cpu"] for _, other in rounds
    )
    # CPU seconds: on a machine other work keeps busy, the single-threaded sides' CPU time is the steadier
    # measure (wall time then counts the time each waited for a core)
    cpu_ours = min(mine["cpu"] for mine, _ in rounds)
    cpu_theirs = min(other["cpu"] for _, other in rounds)
    print(
        f"pipeline: {options.regions} regions x {options.trials} trials x 3 steps + report over regions "
        f"= {int(ours['nodes']):,} nodes (htcondor2.dags graph: {int(theirs['nodes']):,}); "
        f"best of {max(1, options.repeat)} alternating rounds; dagflow in the {options.data_mode} data mode"
    )
    print(
        f"{'':18}{'load+validate':>14}{'expand/build':>14}{'write':>9}{'total':>9}{'peak RSS':>11}"
        f"{'(imports)':>11}{'.dag':>9}{'CPU':>9}{'process':>9}"
    )
    for name, row in (("dagflow", ours), ("htcondor2.dags", theirs)):
        print(
            f"{name:18}{row['load']:>13.2f}s{row['expand']:>13.2f}s{row['write']:>8.2f}s{row['total']:>8.2f}s"
            f"{row['peak_mb']:>8.0f} MB{row['base_mb']:>8.0f} MB{row['dag_mb']:>6.1f} MB{row['cpu']:>8.2f}s"
            f"{min(r[0 if name == 'dagflow' else 1]['process'] for r in rounds):>8.2f}s"
        )
    print(
        f"time ratio dagflow / htcondor2.dags: {ratio:.2f}x (target <= {TIME_RATIO_TARGET}x: "
        f"{'met' if ratio <= TIME_RATIO_TARGET else 'MISSED'})"
    )
    print(
        f"whole process ratio dagflow / htcondor2.dags: {process_ratio:.2f}x (target <= {PROCESS_RATIO_TARGET}x: "
        f"{'met' if process_ratio <= PROCESS_RATIO_TARGET else 'MISSED'}; best of each: {process_ours:.2f}s / "
        f"{process_theirs:.2f}s; CPU {process_cpu_ratio:.2f}x)"
    )
    print(
        f"CPU time ratio: {cpu_ours / cpu_theirs:.2f}x (each side's least CPU seconds over the rounds: "
        f"{cpu_ours:.2f}s / {cpu_theirs:.2f}s)"
    )
    print(
        f"dagflow peak RSS: {ours['peak_mb']:.0f} MB (target < {PEAK_MB_TARGET} MB: "
        f"{'met' if ours['peak_mb'] < PEAK_MB_TARGET else 'MISSED'})"
    )


if __name__ == "__main__":
    main()
