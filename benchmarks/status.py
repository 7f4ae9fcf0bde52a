"""How long `dagflow status` takes to read a 100k-node condor run's files.

Writes, in a temporary directory, a node status file and a job event log for N nodes in the formats
DAGMan and HTCondor write (every node submitted, executed, one image-size update, terminated; 2% held
with a reason and released; 1% evicted; 1% exit code 1), plus the matching jobstate log, and times:

- dagflow's readers: the node status file, the event log, the jobstate log, and their sum (the
  target: under 1 s for the status file and event log at 100k nodes);
- the bindings' readers on the same files, as the baseline: classad2.parseAds and
  htcondor2.JobEventLog (checked to agree with dagflow's results on every node).

    python benchmarks/status.py [--nodes 100000] [--skip-bindings]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagflow.engines.condor import events, jobstate, status_files

BASE = 1740837600  # 2025-03-01 14:00:00 UTC

TERMINATED_BODY = (
    "\t\tUsr 0 00:00:12, Sys 0 00:00:01  -  Run Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
    "\t\tUsr 0 00:00:12, Sys 0 00:00:01  -  Total Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
    "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n"
    "\t0  -  Total Bytes Sent By Job\n\t0  -  Total Bytes Received By Job\n"
    "\tPartitionable Resources :    Usage  Request Allocated\n"
    "\t   Cpus                 :     0.20        1         1\n"
    "\t   Disk (KB)            :       40     1024   1048576\n"
    "\t   Memory (MB)          :        3     1024      1024\n"
)


def stamp(offset: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(BASE + offset))


def write_files(directory: Path, nodes: int) -> tuple[Path, Path, Path]:
    host = "<10.0.0.5:9618?addrs=10.0.0.5-9618&noUDP&sock=schedd_1801_5c2e>"
    log: list[str] = []
    js: list[str] = [f"{BASE} INTERNAL *** DAGMAN_STARTED 100.0 ***\n"]
    ads: list[str] = [
        '[\n  Type = "DagStatus";\n  DagFiles = {\n    "big.dag"\n  };\n'
        f"  Timestamp = {BASE + 3600};\n  DagStatus = 3;\n  NodesTotal = {nodes};\n]\n"
    ]
    for index in range(nodes):
        name, cluster, t = f"n{index:06d}", 1000 + index, index % 3000
        log.append(f"000 ({cluster}.000.000) {stamp(t)} Job submitted from host: {host}\n    DAG Node: {name}\n...\n")
        log.append(f"001 ({cluster}.000.000) {stamp(t + 5)} Job executing on host: {host}\n...\n")
        log.append(
            f"006 ({cluster}.000.000) {stamp(t + 6)} Image size of job updated: 2500\n"
            "\t3  -  MemoryUsage of job (MB)\n\t2156  -  ResidentSetSize of job (KB)\n...\n"
        )
        js.append(f"{BASE + t} {name} SUBMIT {cluster}.0 - - 1\n{BASE + t + 5} {name} EXECUTE {cluster}.0 - - 1\n")
        if index % 50 == 7:
            log.append(
                f"012 ({cluster}.000.000) {stamp(t + 7)} Job was held.\n"
                "\tError from slot1@exec.example.org: Job has gone over cgroup memory limit of 1024 megabytes.\n"
                "\tCode 34 Subcode 0\n...\n"
                f"013 ({cluster}.000.000) {stamp(t + 8)} Job was released.\n\tvia condor_release (by user alice)\n...\n"
            )
        if index % 100 == 3:
            log.append(
                f"004 ({cluster}.000.000) {stamp(t + 9)} Job was evicted.\n\t(0) Job was not checkpointed.\n"
                "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n"
                "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
                "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n...\n"
            )
        code = 1 if index % 100 == 11 else 0
        log.append(
            f"005 ({cluster}.000.000) {stamp(t + 60)} Job terminated.\n"
            f"\t(1) Normal termination (return value {code})\n{TERMINATED_BODY}...\n"
        )
        verdict = "JOB_FAILURE" if code else "JOB_SUCCESS"
        js.append(
            f"{BASE + t + 60} {name} JOB_TERMINATED {cluster}.0 - - 1\n{BASE + t + 60} {name} {verdict} {code} - - 1\n"
        )
        ads.append(
            f'[\n  Type = "NodeStatus";\n  Node = "{name}";\n  NodeStatus = {6 if code else 5};\n'
            f"  StatusDetails = \"{f'Job proc ({cluster}.0.0) failed with status 1' if code else ''}\";\n"
            "  RetryCount = 0;\n  JobProcsQueued = 0;\n  JobProcsHeld = 0;\n]\n"
        )
    ads.append(f'[\n  Type = "StatusEnd";\n  EndTime = {BASE + 3600};\n  NextUpdate = 0;\n]\n')
    paths = directory / "big.status", directory / "dagflow.jobs.log", directory / "big.jobstate.log"
    for path, parts in zip(paths, (ads, log, js), strict=True):
        path.write_text("".join(parts))
    return paths


def timed(function: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--skip-bindings", action="store_true", help="Do not time classad2/JobEventLog.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        status_path, log_path, js_path = write_files(Path(tmp), args.nodes)
        sizes = {path.name: path.stat().st_size / 1e6 for path in (status_path, log_path, js_path)}
        t_status, snapshot = timed(lambda: status_files.read_node_status(status_path))
        t_events, jobs = timed(lambda: events.read_events(log_path))
        t_js, history = timed(lambda: jobstate.read_jobstate(js_path))
        assert snapshot is not None and len(snapshot.nodes) == args.nodes
        assert len(jobs) == args.nodes and history is not None and len(history.nodes) == args.nodes
        rows = [
            (f"node status file ({sizes[status_path.name]:.1f} MB)", t_status),
            (f"job event log ({sizes[log_path.name]:.1f} MB)", t_events),
            ("status file + event log (target < 1 s)", t_status + t_events),
            (f"jobstate log ({sizes[js_path.name]:.1f} MB)", t_js),
            ("all three", t_status + t_events + t_js),
        ]
        print(f"{args.nodes} nodes; best of 3 runs")
        print(f"{'reader':<44}{'seconds':>10}{'vs baseline':>14}")
        for label, seconds in rows:
            print(f"{label:<44}{seconds:>10.3f}{'':>14}")
        if args.skip_bindings:
            return
        data = status_path.read_bytes()
        t_classad, reference = timed(lambda: status_files.parse_node_status_with_classad(data), repeat=1)
        t_jel, bound = timed(lambda: events.read_events_with_bindings(log_path), repeat=1)
        assert reference == snapshot.nodes, "classad2 and the fast status file reader disagree"
        assert bound == jobs, "JobEventLog and the fast event log scan disagree"
        print(f"{'classad2.parseAds, status file (baseline)':<44}{t_classad:>10.3f}{t_classad / t_status:>13.1f}x")
        print(f"{'htcondor2.JobEventLog, event log (baseline)':<44}{t_jel:>10.3f}{t_jel / t_events:>13.1f}x")
        print("(baseline rows: seconds of the bindings' reader, and how many times dagflow's reader is faster)")


if __name__ == "__main__":
    main()
