"""Local engine overhead: dagflow vs a minimal executor (the floor), Snakemake and Luigi.

Every node runs `true`, so the wall time is pure orchestration: spawning, dependency tracking and
bookkeeping. All tools get 2 slots. Shapes:

  fanout  41 regions x 40 trials x a 3-step chain (a -> b -> c), plus one aggregate over all: 4,921 nodes
  chain   a 500-node linear chain

Tools:

  floor      a minimal Python executor in this process: subprocess.Popen(["true"]) in dependency order,
             2 at a time, reaping with os.wait(); nothing else. The "x floor" column divides by its time.
  spawn-floor  the same minimal executor, but starting each command the way dagflow does: posix_spawn in
             its own process group, stdin from /dev/null, stdout and stderr to pipes read at exit, SIGPIPE
             and SIGXFSZ back to their defaults (what a node needs for timeouts, kills and logs). The "x
             spawn-floor" column divides by its time: what dagflow's orchestration adds on top.
  dagflow    `dagflow run pipeline.yaml --jobs 2` on a generated pipeline file (total CLI wall time:
             load, validate, expand, run, journal).
  snakemake  `snakemake --cores 2 --scheduler greedy` on an equivalent Snakefile (one wildcard rule per
             step; outputs are touch() markers, since Snakemake needs files to track completion).
  luigi      luigi.build(workers=2, local_scheduler=True) on equivalent tasks (marker-file targets).

"loop s" is the node loop alone: from the first node's start to the last node's end, as the run's journal
records them (dagflow); a minimal executor is all loop, so its loop is its wall time. "loop x floor" divides by
the floor's (#41 target: 1.25 for dagflow, start-up counted apart).

"cpu s" is the CPU time of the tool and of every process it started (the nodes too), from getrusage:
on a loaded machine, where wall times swing, its ratio to the floor's is the steadier comparison.

Snakemake and Luigi are installed into benchmarks/.venv-others on first use (pip, from PyPI); a tool
that fails to install is skipped with a note. They are not dagflow dependencies.

    python benchmarks/local_overhead.py                  # everything (several minutes: Luigi is slow)
    python benchmarks/local_overhead.py --quick          # small shapes, a smoke run
    python benchmarks/local_overhead.py --only floor,dagflow --shapes fanout --repeat 3
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
OTHERS_VENV = HERE / ".venv-others"
TOOLS = ("floor", "spawn-floor", "dagflow", "snakemake", "luigi")
SLOTS = 2


# --- the DAGs -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Shape:
    name: str
    description: str
    parents: dict[str, list[str]]  # node -> parents, in a topological order
    pipeline_yaml: str
    snakefile: str

    @property
    def nodes(self) -> int:
        return len(self.parents)


def fanout_shape(regions: int, trials: int) -> Shape:
    region_values = [f"r{i:02d}" for i in range(regions)]
    trial_values = [f"t{i:02d}" for i in range(trials)]
    parents: dict[str, list[str]] = {}
    for region in region_values:
        for trial in trial_values:
            parents[f"a.{region}.{trial}"] = []
            parents[f"b.{region}.{trial}"] = [f"a.{region}.{trial}"]
            parents[f"c.{region}.{trial}"] = [f"b.{region}.{trial}"]
    parents["aggregate"] = [f"c.{r}.{t}" for r in region_values for t in trial_values]

    pipeline = "\n".join(
        [
            "name: overhead-fanout",
            "matrix:",
            f"  region: [{', '.join(region_values)}]",
            f"  trial: [{', '.join(trial_values)}]",
            "steps:",
            '  a: {command: "true"}',
            '  b: {command: "true", needs: [a]}',
            '  c: {command: "true", needs: [b]}',
            '  aggregate: {command: "true", needs: [c], over: [region, trial]}',
            "",
        ]
    )
    snakefile = f"""\
REGIONS = {region_values!r}
TRIALS = {trial_values!r}

rule all:
    input: "done/aggregate"

rule aggregate:
    input: expand("done/c.{{region}}.{{trial}}", region=REGIONS, trial=TRIALS)
    output: touch("done/aggregate")
    shell: "true"

rule c:
    input: "done/b.{{region}}.{{trial}}"
    output: touch("done/c.{{region}}.{{trial}}")
    shell: "true"

rule b:
    input: "done/a.{{region}}.{{trial}}"
    output: touch("done/b.{{region}}.{{trial}}")
    shell: "true"

rule a:
    output: touch("done/a.{{region}}.{{trial}}")
    shell: "true"
"""
    return Shape(
        "fanout",
        f"{regions} regions x {trials} trials x 3-step chain + aggregate",
        parents,
        pipeline,
        snakefile,
    )


def chain_shape(length: int) -> Shape:
    names = [f"s{i:04d}" for i in range(length)]
    parents = {name: ([names[i - 1]] if i else []) for i, name in enumerate(names)}
    lines = ["name: overhead-chain", "steps:"]
    for i, name in enumerate(names):
        needs = f", needs: [{names[i - 1]}]" if i else ""
        lines.append(f'  {name}: {{command: "true"{needs}}}')
    # Snakemake builds its DAG recursively, about 20 frames per chain link: raise Python's limit.
    snakefile = f"""\
import sys
sys.setrecursionlimit(max(sys.getrecursionlimit(), {length * 50}))

rule all:
    input: "done/s{length - 1:04d}"

rule step:
    input: lambda w: [] if int(w.i) == 0 else [f"done/s{{int(w.i) - 1:04d}}"]
    output: touch("done/s{{i}}")
    wildcard_constraints: i=r"\\d{{4}}"
    shell: "true"
"""
    return Shape("chain", f"{length}-node linear chain", parents, "\n".join(lines) + "\n", snakefile)


# --- results --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Result:
    shape: str
    nodes: int
    tool: str
    wall_s: float | None  # None: skipped or failed
    note: str = ""
    cpu_s: float | None = None  # CPU seconds of the tool and every process it started (the nodes too)
    loop_s: float | None = None  # first node start to last node end (None: not known for this tool)
    details: dict[str, str] = field(default_factory=dict)


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run_timed(argv: list[str], cwd: Path, timeout: float) -> tuple[float | None, str, float | None]:
    """Run argv; return (wall seconds or None, a note on failure, CPU seconds of it and its children)."""
    cpu = cpu_seconds(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f}s", None
    except FileNotFoundError as error:
        return None, f"cannot start: {error}", None
    wall = time.perf_counter() - started
    if done.returncode != 0:
        return None, f"exit {done.returncode}: {error_tail(done.stderr or done.stdout)}", None
    return wall, "", cpu_seconds(resource.RUSAGE_CHILDREN) - cpu


def error_tail(text: str, lines: int = 2) -> str:
    """The last few meaningful lines of a tool's output, without rich's box drawing."""
    cleaned = [" ".join(line.strip(" ╭╮╰╯─│").split()) for line in text.splitlines()]
    return " | ".join([line for line in cleaned if line][-lines:])


def count_markers(directory: Path) -> int:
    return sum(1 for _ in directory.iterdir()) if directory.is_dir() else 0


# --- the floor ------------------------------------------------------------------------------------


# Starts one `true`; returns its pid and what to do once os.wait() has reaped it (with its status).
Starter = Callable[[], tuple[int, Callable[[int], None]]]


def minimal_executor(parents: dict[str, list[str]], slots: int, start: Starter) -> int:
    """Start a `true` for every node in dependency order, `slots` at a time, reaping with os.wait();
    nothing else. Returns nodes run."""
    waiting = {name: len(ps) for name, ps in parents.items()}
    children: dict[str, list[str]] = {name: [] for name in parents}
    for name, ps in parents.items():
        for parent in ps:
            children[parent].append(name)
    ready = [name for name, count in waiting.items() if count == 0]
    ready.reverse()  # pop() from the end keeps the topological order
    running: dict[int, tuple[str, Callable[[int], None]]] = {}
    finished = 0
    while ready or running:
        while ready and len(running) < slots:
            name = ready.pop()
            pid, reaped = start()
            running[pid] = (name, reaped)
        pid, status = os.wait()
        name, reaped = running.pop(pid)
        reaped(status)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"node {name} failed")
        finished += 1
        for child in children[name]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return finished


def floor_executor(parents: dict[str, list[str]], slots: int) -> int:
    """The floor: subprocess.Popen(["true"])."""

    def start() -> tuple[int, Callable[[int], None]]:
        process = subprocess.Popen(["true"])

        # The Popen object is kept until then and told its status: one dropped while running would
        # be reaped by subprocess's own cleanup.
        def reaped(status: int) -> None:
            process.returncode = os.waitstatus_to_exitcode(status)

        return process.pid, reaped

    return minimal_executor(parents, slots, start)


def spawn_floor_executor(parents: dict[str, list[str]], slots: int) -> int:
    """The floor, starting each `true` as dagflow's local runner starts a node (see the module doc)."""
    program = shutil.which("true") or "/bin/true"
    devnull = os.open(os.devnull, os.O_RDONLY)
    defaults = (signal.SIGPIPE, signal.SIGXFSZ)
    dup2 = os.POSIX_SPAWN_DUP2

    def start() -> tuple[int, Callable[[int], None]]:
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        actions = [(dup2, devnull, 0), (dup2, out_w, 1), (dup2, err_w, 2)]
        pid = os.posix_spawn(program, ["true"], os.environ, file_actions=actions, setpgroup=0, setsigdef=defaults)
        os.close(out_w)
        os.close(err_w)

        def reaped(status: int) -> None:
            for fd in (out_r, err_r):
                while os.read(fd, 65536):
                    pass
                os.close(fd)

        return pid, reaped

    try:
        return minimal_executor(parents, slots, start)
    finally:
        os.close(devnull)


def _bench_executor(tool: str, executor: Callable[[dict[str, list[str]], int], int], shape: Shape) -> Result:
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    count = executor(shape.parents, SLOTS)
    wall = time.perf_counter() - started
    cpu = cpu_seconds(resource.RUSAGE_SELF) + cpu_seconds(resource.RUSAGE_CHILDREN) - cpu
    note = "" if count == shape.nodes else f"ran {count} of {shape.nodes}"
    return Result(shape.name, shape.nodes, tool, wall if not note else None, note, cpu, wall)


def bench_floor(shape: Shape, workdir: Path, timeout: float) -> Result:
    return _bench_executor("floor", floor_executor, shape)


def bench_spawn_floor(shape: Shape, workdir: Path, timeout: float) -> Result:
    return _bench_executor("spawn-floor", spawn_floor_executor, shape)


# --- dagflow --------------------------------------------------------------------------------------


def dagflow_command() -> list[str]:
    script = Path(sys.executable).with_name("dagflow")
    return [str(script)] if script.exists() else [sys.executable, "-m", "dagflow"]


def bench_dagflow(shape: Shape, workdir: Path, timeout: float) -> Result:
    pipeline = workdir / "pipeline.yaml"
    pipeline.write_text(shape.pipeline_yaml)
    wall, note, cpu = run_timed([*dagflow_command(), "run", str(pipeline), "--jobs", str(SLOTS)], workdir, timeout)
    return Result(shape.name, shape.nodes, "dagflow", wall, note, cpu, node_loop_s(workdir))


def node_loop_s(workdir: Path) -> float | None:
    """The run's first node start to its last node end, from its journal (the one run under workdir)."""
    starts, ends = [], []
    for journal in workdir.glob(".dagflow/runs/*/journal.jsonl"):
        for line in journal.read_text().splitlines():
            event = json.loads(line)
            if event.get("e") == "start":
                starts.append(event["t"])
            elif event.get("e") == "end":
                ends.append(event["t"])
    return max(ends) - min(starts) if starts and ends else None


# --- Snakemake and Luigi, in their own venv -------------------------------------------------------


def others_python() -> Path:
    return OTHERS_VENV / "bin" / "python"


def ensure_tool(tool: str, log: Callable[[str], None]) -> str | None:
    """Make `tool` importable in the others venv; return None, or why it cannot be used."""
    module = {"snakemake": "snakemake", "luigi": "luigi"}[tool]
    if not others_python().exists():
        log(f"creating {OTHERS_VENV} (first use)")
        try:
            venv.create(OTHERS_VENV, with_pip=True)
        except Exception as error:  # any failure here means: skip the tool
            return f"could not create {OTHERS_VENV}: {error}"
    check = [str(others_python()), "-c", f"import {module}"]
    if subprocess.run(check, capture_output=True, check=False).returncode == 0:
        return None
    log(f"installing {tool} into {OTHERS_VENV} (pip)")
    install = subprocess.run(
        [str(others_python()), "-m", "pip", "install", "-q", tool],
        capture_output=True,
        text=True,
        check=False,
    )
    if install.returncode != 0:
        tail = " | ".join(install.stderr.strip().splitlines()[-2:])
        return f"pip install {tool} failed: {tail}"
    if subprocess.run(check, capture_output=True, check=False).returncode != 0:
        return f"{tool} installed but does not import"
    return None


def tool_version(tool: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({tool!r}))"
    done = subprocess.run([str(others_python()), "-c", code], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"


def bench_snakemake(shape: Shape, workdir: Path, timeout: float) -> Result:
    (workdir / "Snakefile").write_text(shape.snakefile)
    argv = [
        str(others_python()),
        "-m",
        "snakemake",
        "--snakefile",
        "Snakefile",
        "--cores",
        str(SLOTS),
        "--scheduler",
        "greedy",
        "--quiet",
    ]
    wall, note, cpu = run_timed(argv, workdir, timeout)
    made = count_markers(workdir / "done")
    if wall is not None and made != shape.nodes:
        wall, note = None, f"made {made} of {shape.nodes} outputs"
    return Result(shape.name, shape.nodes, "snakemake", wall, note or f"{tool_version('snakemake')}, greedy", cpu)


LUIGI_DRIVER = """\
import json, subprocess, sys
from pathlib import Path
import luigi

PARENTS = json.loads(Path("dag.json").read_text())


class Node(luigi.Task):
    name = luigi.Parameter()

    def requires(self):
        return [Node(name=parent) for parent in PARENTS[self.name]]

    def output(self):
        return luigi.LocalTarget(f"done/{self.name}")

    def run(self):
        subprocess.run(["true"], check=True)
        with self.output().open("w"):
            pass


children = {child for parents in PARENTS.values() for child in parents}
sinks = [Node(name=name) for name in PARENTS if name not in children]
ok = luigi.build(sinks, workers=int(sys.argv[1]), local_scheduler=True, log_level="WARNING")
sys.exit(0 if ok else 1)
"""


def bench_luigi(shape: Shape, workdir: Path, timeout: float) -> Result:
    (workdir / "dag.json").write_text(json.dumps(shape.parents))
    (workdir / "luigi_driver.py").write_text(LUIGI_DRIVER)
    wall, note, cpu = run_timed([str(others_python()), "luigi_driver.py", str(SLOTS)], workdir, timeout)
    made = count_markers(workdir / "done")
    if wall is not None and made != shape.nodes:
        wall, note = None, f"made {made} of {shape.nodes} outputs"
    return Result(shape.name, shape.nodes, "luigi", wall, note or f"{tool_version('luigi')}, local scheduler", cpu)


BENCHES: dict[str, Callable[[Shape, Path, float], Result]] = {
    "floor": bench_floor,
    "spawn-floor": bench_spawn_floor,
    "dagflow": bench_dagflow,
    "snakemake": bench_snakemake,
    "luigi": bench_luigi,
}


# --- the table ------------------------------------------------------------------------------------


def render_table(results: list[Result]) -> str:
    floors = {(r.shape, r.tool): r.wall_s for r in results if r.tool in ("floor", "spawn-floor") and r.wall_s}
    cpu_floors = {r.shape: r.cpu_s for r in results if r.tool == "floor" and r.wall_s and r.cpu_s}
    header = ("shape", "nodes", "tool", "wall s", "x floor", "x spawn-floor", "ms/node over floor", "loop s",
              "loop x floor", "cpu s", "cpu x floor", "note")  # fmt: skip
    numeric = (1, 3, 4, 5, 6, 7, 8, 9, 10)

    def ratio(r: Result, floor_tool: str) -> str:
        floor = floors.get((r.shape, floor_tool))
        return f"{r.wall_s / floor:.2f}" if r.wall_s is not None and floor else "-"

    rows = [header]
    for r in results:
        floor = floors.get((r.shape, "floor"))
        wall = f"{r.wall_s:.2f}" if r.wall_s is not None else "-"
        extra = (
            f"{(r.wall_s - floor) / r.nodes * 1000:.2f}"
            if r.wall_s is not None and floor and r.tool != "floor"
            else "-"
        )
        cpu = f"{r.cpu_s:.2f}" if r.wall_s is not None and r.cpu_s is not None else "-"
        cpu_floor = cpu_floors.get(r.shape)
        cpu_ratio = f"{r.cpu_s / cpu_floor:.2f}" if cpu != "-" and cpu_floor and r.cpu_s is not None else "-"
        loop = f"{r.loop_s:.2f}" if r.wall_s is not None and r.loop_s is not None else "-"
        loop_ratio = f"{r.loop_s / floor:.2f}" if loop != "-" and floor and r.loop_s is not None else "-"
        rows.append(
            (r.shape, str(r.nodes), r.tool, wall, ratio(r, "floor"), ratio(r, "spawn-floor"), extra, loop, loop_ratio,
             cpu, cpu_ratio, r.note)
        )  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    lines = []
    for index, row in enumerate(rows):
        cells = [
            cell.rjust(width) if i in numeric else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=False))
        ]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
        if index == 0:
            lines.append("  ".join("-" * width for width in widths) + "  ----")
    return "\n".join(lines)


def run_rounds(repeat: int, tools: list[str], shape: Shape, base: Path, timeout: float) -> list[Result]:
    """Run every tool `repeat` times in alternating rounds (so a slow spell of the machine hits all of
    them alike), each run in a fresh directory; keep each tool's fastest run, or its first failure."""
    best: dict[str, Result] = {}
    walls: dict[str, list[float]] = {tool: [] for tool in tools}
    failed: set[str] = set()
    for attempt in range(repeat):
        for tool in tools:
            if tool in failed:
                continue
            workdir = base / tool / str(attempt)
            workdir.mkdir(parents=True)
            log(f"{shape.name} ({shape.nodes} nodes): {tool} ...")
            result = BENCHES[tool](shape, workdir, timeout)
            log(f"{shape.name}: {tool} {f'{result.wall_s:.2f}s' if result.wall_s is not None else result.note}")
            if result.wall_s is None:
                failed.add(tool)
                best[tool] = result
            else:
                walls[tool].append(result.wall_s)
                if tool not in best or result.wall_s < (best[tool].wall_s or 0):
                    best[tool] = result
    results = [best[tool] for tool in tools]
    if repeat > 1:
        for result in results:
            if result.wall_s is not None:
                median = statistics.median(walls[result.tool])
                result.note = f"best of {repeat}, median {median:.2f}s" + (f"; {result.note}" if result.note else "")
    return results


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small shapes (5x4 fan-out, 50-node chain)")
    parser.add_argument("--only", default=",".join(TOOLS), help=f"comma-separated tools ({', '.join(TOOLS)})")
    parser.add_argument("--shapes", default="fanout,chain", help="comma-separated shapes (fanout, chain)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per tool per shape")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool and shape; the fastest counts")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--json", type=Path, help="also write the results here as JSON")
    args = parser.parse_args(argv)
    args.tools = [t.strip() for t in args.only.split(",") if t.strip()]
    args.shape_names = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [t for t in args.tools if t not in TOOLS] + [s for s in args.shape_names if s not in ("fanout", "chain")]
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if unknown:
        parser.error(f"unknown tool or shape: {', '.join(unknown)}")
    return args


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    shapes = {
        "fanout": fanout_shape(5, 4) if args.quick else fanout_shape(41, 40),
        "chain": chain_shape(50) if args.quick else chain_shape(500),
    }
    skipped: dict[str, str] = {}
    for tool in ("snakemake", "luigi"):
        if tool in args.tools and (why := ensure_tool(tool, log)):
            skipped[tool] = why
            log(f"skipping {tool}: {why}")

    # dagflow's modules byte-compiled, as a regular install has them (an editable install writes them on first
    # import, unless PYTHONDONTWRITEBYTECODE is set: then every run would compile its source again).
    compileall.compile_dir(HERE.parent / "dagflow", quiet=1)
    results: list[Result] = []
    root = Path(tempfile.mkdtemp(prefix="dagflow-overhead-"))
    try:
        for shape_name in args.shape_names:
            shape = shapes[shape_name]
            tools = [tool for tool in args.tools if tool not in skipped]
            ran = {r.tool: r for r in run_rounds(args.repeat, tools, shape, root / shape.name, args.timeout)}
            for tool in args.tools:
                skip = Result(shape.name, shape.nodes, tool, None, f"skipped: {skipped.get(tool)}")
                results.append(ran.get(tool, skip))
    finally:
        if args.keep:
            log(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    cpus = os.cpu_count()
    print(f"local overhead: every node runs `true`, {SLOTS} slots, {cpus} CPUs, Python {sys.version.split()[0]}")
    for shape_name in args.shape_names:
        print(f"  {shape_name}: {shapes[shape_name].description}")
    print()
    print(render_table(results))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0 if all(r.wall_s is not None or r.note.startswith("skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
