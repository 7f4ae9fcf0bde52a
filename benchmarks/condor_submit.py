"""Time from `dagflow submit` to the first node running, against `condor_submit_dag` of the same files.

Needs the one-machine test pool (`scripts/condor-pool.sh up`); exits 2 when it is not up. Started as
root, it runs itself again as the pool user (HTCondor refuses jobs owned by root), in a fresh directory
that user owns under the pool's work/.

Each round submits a small pipeline (3 regions x 2 steps of `sh -c "sleep 2"`, 16 MB memory, 1 MB disk)
twice, alternating the two tools:

- dagflow: `python -m dagflow submit pipeline.yaml --json` (the whole process: interpreter start, imports,
  compile, htcondor2.Submit.from_dag and the schedd submit);
- condor_submit_dag: `dagflow compile pipeline.yaml -o DIR` beforehand (not timed), then
  `condor_submit_dag DIR/bench.dag`.

For each it takes the command's own wall time and the time from the command's start to the first node job
running (the measure compared; target: dagflow's median at most 1.2x condor_submit_dag's): the node jobs'
event log (`log =` of every node, dagflow.jobs.log) is polled every 0.05 s for an EXECUTE event (`001 (`),
which the shadow writes when the job starts on its slot (the events' own timestamps have whole seconds
only, so the time the poll sees the event is used: about 0.05 s resolution). On the way it notes when the
DAGMan job ran (its EXECUTE event in <dag>.dagman.log) and when DAGMan submitted the first node (a SUBMIT
event): after the submit command, the time goes to the schedd starting DAGMan and to negotiation. Then the
DAGMan job is removed and the benchmark waits until none of its jobs is left in the queue.

Other users' jobs on the same pool delay negotiation: the table shows how many were queued at each start.

    python benchmarks/condor_submit.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POOL_SCRIPT = ROOT / "scripts" / "condor-pool.sh"
STATE = Path(os.environ.get("DAGFLOW_CONDOR_DIR", "/var/tmp/dagflow-condor"))
CONFIG = STATE / "condor_config"
RELEASE_BIN = STATE / "release" / "htcondor" / "bin"
POLL_S = 0.05
FIRST_RUN_TIMEOUT_S = 300.0
DRAIN_TIMEOUT_S = 300.0
NAME = "bench"
PIPELINE = """\
name: bench
matrix:
  region: [us, br, de]
steps:
  first:
    command: sh -c "sleep 2"
    resources: {memory: 16MB, disk: 1MB}
  second:
    needs: [first]
    command: sh -c "sleep 2"
    resources: {memory: 16MB, disk: 1MB}
"""
# Set on the run as the pool user: root checked the pool (the pool user cannot signal root's condor_master).
CHECKED = "DAGFLOW_BENCH_POOL_CHECKED"
DAGFLOW = "dagflow submit"
CONDOR = "condor_submit_dag"


class BenchmarkError(RuntimeError):
    """A step of the benchmark failed; the message says which and why."""


@dataclass(frozen=True)
class Sample:
    tool: str
    round: int
    cluster: int
    wall: float  # the command's own run time, s
    # seconds from the command's start until each was seen in the event logs
    dagman_running: float  # the DAGMan job's EXECUTE event
    node_submitted: float  # a node job's SUBMIT event
    first_running: float  # a node job's EXECUTE event: the measure compared
    others: int  # other jobs in the queue when the command started


def pool_is_up() -> bool:
    done = subprocess.run([str(POOL_SCRIPT), "status"], capture_output=True, check=False)
    return done.returncode == 0


def pool_user() -> str:
    return subprocess.run([str(POOL_SCRIPT), "user"], capture_output=True, text=True, check=True).stdout.strip()


def client_env() -> dict[str, str]:
    """The pool's client environment: its configuration, its tools and this interpreter first on PATH."""
    path = f"{RELEASE_BIN}:{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    return {"CONDOR_CONFIG": str(CONFIG), "PATH": path, "HOME": str(STATE / "work"), "LANG": "C.UTF-8"}


def rerun_as(user: str, script: str = __file__) -> None:
    """Replace this process with the same benchmark (script) run as the pool user (never returns)."""
    env = [f"{key}={value}" for key, value in {**client_env(), CHECKED: "1"}.items()]
    argv = ["runuser", "-u", user, "--", "env", *env, sys.executable, str(Path(script).resolve()), *sys.argv[1:]]
    os.chdir(STATE / "work")
    os.execvp(argv[0], argv)


def run(argv: list[str], cwd: Path, timeout: float = 120) -> str:
    """stdout of argv; a clear error with its output when it fails."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise BenchmarkError(f"`{' '.join(argv)}` exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def queued_clusters(constraint: str = "true") -> list[int]:
    out = run(["condor_q", "-allusers", "-constraint", constraint, "-af", "ClusterId"], cwd=STATE / "work")
    return [int(line) for line in out.split()]


def event_seen(log: Path, code: bytes) -> bool:
    """Whether the event log has an event of this code (b"000" submit, b"001" execute)."""
    try:
        data = log.read_bytes()
    except FileNotFoundError:
        return False
    return data.startswith(code + b" (") or b"\n" + code + b" (" in data


def milestones(dag: Path) -> dict[str, tuple[Path, bytes]]:
    """What is polled for, in order: DAGMan's own EXECUTE event, a node's SUBMIT, a node's EXECUTE."""
    nodes = dag.parent / "dagflow.jobs.log"
    return {
        "dagman_running": (dag.parent / f"{dag.name}.dagman.log", b"001"),
        "node_submitted": (nodes, b"000"),
        "first_running": (nodes, b"001"),
    }


def timed_submit(
    argv: list[str], cwd: Path, dag: Path, cluster_of: Callable[[str], int]
) -> tuple[float, dict[str, float], int]:
    """Run argv, which submits dag and prints its DAGMan job (cluster_of finds it in the output); return its
    wall time, the seconds from its start to each milestone, and the DAGMan cluster. A DAG submitted whose
    node never runs is removed before the error is raised."""
    ended: list[float] = []
    result: list[tuple[str, str]] = []
    started = time.perf_counter()
    process = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait() -> None:
        result.append(process.communicate())
        ended.append(time.perf_counter())

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    seen: dict[str, float] = {}
    late: str | None = None
    for name, (log, code) in milestones(dag).items():
        while not event_seen(log, code) and not (ended and process.returncode != 0):
            if time.perf_counter() - started > FIRST_RUN_TIMEOUT_S:
                late = f"`{' '.join(argv)}`: no {name} within {FIRST_RUN_TIMEOUT_S:.0f} s ({log})"
                break
            time.sleep(POLL_S)
        seen[name] = time.perf_counter() - started
    waiter.join()
    stdout, stderr = result[0]
    if process.returncode != 0:
        raise BenchmarkError(f"`{' '.join(argv)}` exited {process.returncode}:\n{stdout}{stderr}")
    cluster = cluster_of(stdout)
    if late:
        remove_and_drain(cluster, cwd)
        raise BenchmarkError(late)
    return ended[0] - started, seen, cluster


def dagflow_cluster(stdout: str) -> int:
    """The DAGMan job's cluster from `dagflow submit --json`'s output."""
    try:
        return int(str(json.loads(stdout)["dagman_job"]).split(".")[0])
    except (ValueError, KeyError, TypeError) as error:
        raise BenchmarkError(f"dagflow submit printed no DAGMan job id ({error}):\n{stdout}") from error


def condor_cluster(stdout: str) -> int:
    """The DAGMan job's cluster from condor_submit_dag's output."""
    found = re.search(r"submitted to cluster (\d+)", stdout)
    if found is None:
        raise BenchmarkError(f"condor_submit_dag printed no cluster:\n{stdout}")
    return int(found.group(1))


def remove_and_drain(cluster: int, workdir: Path) -> None:
    """condor_rm the DAGMan job and wait until neither it nor any of its node jobs is queued."""
    run(["condor_rm", str(cluster)], cwd=workdir)
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while queued_clusters(f"ClusterId == {cluster} || DAGManJobId == {cluster}"):
        if time.monotonic() > deadline:
            raise BenchmarkError(f"DAGMan job {cluster} still has jobs queued {DRAIN_TIMEOUT_S:.0f} s after condor_rm")
        time.sleep(0.5)


def dagflow_round(workdir: Path, index: int) -> Sample:
    run_id = f"df-{index}"
    dag = workdir / "runs" / run_id / "condor" / f"{NAME}.dag"
    argv = [sys.executable, "-m", "dagflow", "submit", "pipeline.yaml", "--json", "--run-id", run_id]
    others = len(queued_clusters())
    wall, seen, cluster = timed_submit([*argv, "--runs-dir", "runs"], workdir, dag, dagflow_cluster)
    remove_and_drain(cluster, workdir)
    return Sample(DAGFLOW, index, cluster, wall, others=others, **seen)


def condor_round(workdir: Path, index: int) -> Sample:
    out = workdir / f"csd-{index}"
    run([sys.executable, "-m", "dagflow", "compile", "pipeline.yaml", "-o", str(out)], cwd=workdir)
    dag = out / f"{NAME}.dag"
    others = len(queued_clusters())
    wall, seen, cluster = timed_submit(["condor_submit_dag", str(dag)], workdir, dag, condor_cluster)
    remove_and_drain(cluster, workdir)
    return Sample(CONDOR, index, cluster, wall, others=others, **seen)


COLUMNS = {  # Sample attribute -> column title
    "wall": "submit wall",
    "dagman_running": "DAGMan running",
    "node_submitted": "node submitted",
    "first_running": "FIRST NODE RUNNING",
}


def ratio(by_tool: dict[str, list[Sample]], attribute: str, pick: Callable[[list[float]], float]) -> float:
    """pick (median or min) of dagflow's samples over pick of condor_submit_dag's."""
    dagflow, condor = ([getattr(s, attribute) for s in by_tool[tool]] for tool in (DAGFLOW, CONDOR))
    return pick(dagflow) / pick(condor)


def print_rounds(samples: list[Sample]) -> None:
    print("seconds from the command's start (submit wall: the command's own run time)")
    titles = "".join(f"{title:>20}" for title in COLUMNS.values())
    print(f"{'round':>5}  {'tool':<18} {'cluster':>7}{titles} {'others queued':>14}")
    for s in samples:
        cells = "".join(f"{getattr(s, attribute):>18.2f} s" for attribute in COLUMNS)
        print(f"{s.round:>5}  {s.tool:<18} {s.cluster:>7}{cells} {s.others:>14}")


def print_summary(samples: list[Sample]) -> None:
    print("median / min")
    print(f"{'':<34}" + "".join(f"{title:>20}" for title in COLUMNS.values()))
    by_tool = {tool: [s for s in samples if s.tool == tool] for tool in (DAGFLOW, CONDOR)}
    for tool, rows in by_tool.items():
        cells = []
        for attribute in COLUMNS:
            values = [getattr(s, attribute) for s in rows]
            cells.append(f"{statistics.median(values):.2f} / {min(values):.2f} s")
        print(f"{tool:<34}" + "".join(f"{cell:>20}" for cell in cells))
    cells = [f"{ratio(by_tool, a, statistics.median):.2f}x / {ratio(by_tool, a, min):.2f}x" for a in COLUMNS]
    print(f"{'ratio dagflow / condor_submit_dag':<34}" + "".join(f"{cell:>20}" for cell in cells))
    print("target: FIRST NODE RUNNING, ratio of the medians <= 1.20x")


def benchmark(rounds: int, keep: bool) -> None:
    workdir = STATE / "work" / f"bench-condor-submit-{os.getpid()}-{time.monotonic_ns()}"
    workdir.mkdir(parents=True)
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    samples: list[Sample] = []
    for index in range(1, rounds + 1):
        for measure in (dagflow_round, condor_round):
            sample = measure(workdir, index)
            samples.append(sample)
            print(f"round {index}: {sample.tool}: {sample.first_running:.2f} s to first node", file=sys.stderr)
    print_rounds(samples)
    print()
    print_summary(samples)
    if keep:
        print(f"kept {workdir}", file=sys.stderr)
    else:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="Rounds; each submits once with each tool.")
    parser.add_argument("--keep", action="store_true", help="Keep the work directory (DAG files and logs).")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return on_pool(__file__, lambda: benchmark(args.rounds, args.keep))


def on_pool(script: str, measure: Callable[[], object]) -> int:
    """Run measure as the pool user (script run again as that user, when root), in the pool's client
    environment: 0, else 2 when no pool is up, 1 when a step failed (said on stderr)."""
    if os.environ.get(CHECKED) != "1" and not pool_is_up():
        print(f"no HTCondor pool is up: start it with `{POOL_SCRIPT} up` (see its header)", file=sys.stderr)
        return 2
    user = pool_user()
    if os.geteuid() == 0 and user != "root":
        rerun_as(user, script)
    os.environ.update(client_env())
    try:
        measure()
    except (BenchmarkError, subprocess.TimeoutExpired) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
