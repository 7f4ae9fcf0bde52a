"""How long `dagflow status` takes to read a big condor run's files (100k and 20k nodes by default).

Writes, in a temporary directory, a node status file and a job event log for N nodes, plus the
matching jobstate log (every node submitted, executed, one image-size update, terminated; 2% held
with a reason and released; 1% evicted; 1% exit code 1), and times:

- dagflow's readers: the node status file, the event log, the jobstate log, and their sum (the
  target: under 1 s for the status file and event log at 100k nodes);
- the bindings' readers on the same files, as the baseline: classad2.parseAds and
  htcondor2.JobEventLog (checked to agree with dagflow's results on every node).

The node status file is written in the layout a real DAGMan writes: its ads are the ads of
tests/data/condor-pool/region-retrain.status (written by HTCondor 25.14), with their values replaced,
comments and all. The job event log's submit, execute and terminated events are those of
tests/data/condor-pool/region-retrain.dag.nodes.log (written by the same pool), with their job ids,
times, node names and exit codes replaced: HTCondor 25 names the node in the submit event's ClassAd note,
`[ DAGNodeName = "n000001"; JobBatchName = "..." ]`, not in an older `DAG Node: n000001` line. The image
size, hold, release and eviction events, which that file has none of, keep the layout the event log
documentation gives. The jobstate log numbers submissions across the whole DAG, as DAGMan does.

    python benchmarks/status.py [--nodes 100000 20000] [--skip-bindings]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dagflow.engines.condor import events, jobstate, status_files

BASE = 1740837600  # 2025-03-01 14:00:00 UTC
POOL_DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "condor-pool"
POOL_STATUS_FILE = POOL_DATA / "region-retrain.status"
POOL_EVENT_LOG = POOL_DATA / "region-retrain.dag.nodes.log"
# The names DAGMan writes in the comment after a NodeStatus value.
STATUS_COMMENTS = (
    "STATUS_NOT_READY",
    "STATUS_READY",
    "STATUS_PRERUN",
    "STATUS_SUBMITTED",
    "STATUS_POSTRUN",
    "STATUS_DONE",
    "STATUS_ERROR",
    "STATUS_FUTILE",
)


def stamp(offset: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(BASE + offset))


def _template(ad: str, fields: dict[str, str]) -> str:
    """A str.format template of a pool-written ad: the value of each `Name = value;` of fields becomes
    fields[Name], and the quoted text of the comment after it, if any, `{Name_comment}`. Fails if the
    pool's file lacks one of them."""
    template = ad.replace("{", "{{").replace("}", "}}")
    for name, replacement in fields.items():
        pattern = rf'^([ \t]*{name} = )(?:"[^"\n]*"|\d+)(;(?: /\* ")?)(?:[^"\n]*)(" \*/)?$'
        template, count = re.subn(
            pattern,
            lambda line, name=name, value=replacement: (
                line.group(1) + value + line.group(2) + (f"{{{name}_comment}}" + line.group(3) if line.group(3) else "")
            ),
            template,
            flags=re.MULTILINE,
        )
        assert count == 1, f"{POOL_STATUS_FILE.name} has no line `{name} = ...;`"
    return template


def status_templates() -> tuple[str, str, str]:
    """The pool-written file's DagStatus, (first) NodeStatus and StatusEnd ads, as str.format templates."""
    ads = re.findall(r"^\[\n.*?^\]\n", POOL_STATUS_FILE.read_text(), re.MULTILINE | re.DOTALL)
    by_type = {re.search(r'Type = "(\w+)"', ad).group(1): ad for ad in reversed(ads)}  # type: ignore[union-attr]
    dag = _template(
        by_type["DagStatus"],
        {
            "Timestamp": "{time}",
            "NodesTotal": "{total}",
            "NodesDone": "{done}",
            "NodesFailed": "{failed}",
            "NodesFutile": "0",
        },
    )
    node = _template(
        by_type["NodeStatus"],
        {
            "Node": '"{name}"',
            "NodeStatus": "{status}",
            "StatusDetails": '"{details}"',
            "RetryCount": "{retries}",
            "JobProcsQueued": "0",
            "JobProcsHeld": "0",
        },
    )
    end = _template(by_type["StatusEnd"], {"EndTime": "{time}"})
    return dag, node, end


def status_file_text(outcomes: list[tuple[str, int, int]], written_at: int) -> str:
    """The node status file of nodes given as (name, exit code, cluster), all of them finished."""
    dag, node, end = status_templates()
    written_text = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(written_at))
    failed = sum(1 for _, code, _ in outcomes if code)
    done = len(outcomes) - failed
    parts = [dag.format(time=written_at, Timestamp_comment=written_text, total=len(outcomes), done=done, failed=failed)]
    for name, code, cluster in outcomes:
        status = status_files.ERROR if code else status_files.DONE
        details = f"Job proc ({cluster}.0.0) failed with status {code}" if code else ""
        comment = STATUS_COMMENTS[status]
        parts.append(node.format(name=name, status=status, NodeStatus_comment=comment, details=details, retries=0))
    parts.append(end.format(time=written_at, EndTime_comment=written_text))
    return "".join(parts)


def _event_template(event: str, fields: dict[str, str]) -> str:
    """A str.format template of a pool-written event: the header's job id and time become `{cluster}` and
    `{time}`, and each regular expression of fields (matching once) its replacement."""
    template = event.replace("{", "{{").replace("}", "}}")
    fields = {r"^(\d{3}) \(\d+\.\d+\.\d+\) \S+ \S+": r"\1 ({cluster:03d}.000.000) {time}", **fields}
    for pattern, replacement in fields.items():
        template, count = re.subn(pattern, replacement, template, count=1, flags=re.MULTILINE)
        assert count == 1, f"{POOL_EVENT_LOG.name}: no match for {pattern!r} in\n{event}"
    return template


def event_templates() -> tuple[str, str, str]:
    """The pool-written log's first submit, execute and terminated events, as str.format templates of
    cluster, time, and the node name (submit) or the exit code (terminated)."""
    found = re.findall(r"^\d{3} \(.*?^\.\.\.\n", POOL_EVENT_LOG.read_text(), re.MULTILINE | re.DOTALL)
    first = {event[:3]: event for event in reversed(found)}
    submit = _event_template(first["000"], {r'DAGNodeName = "[^"]*"': 'DAGNodeName = "{name}"'})
    execute = _event_template(first["001"], {})
    terminated = _event_template(first["005"], {r"\(return value \d+\)": "(return value {code})"})
    return submit, execute, terminated


def write_files(directory: Path, nodes: int) -> tuple[Path, Path, Path]:
    submitted, executing, terminated = event_templates()
    log: list[str] = []
    js: list[str] = [f"{BASE} INTERNAL *** DAGMAN_STARTED 100.0 ***\n"]
    outcomes: list[tuple[str, int, int]] = []
    for index in range(nodes):
        name, cluster, t, seq = f"n{index:06d}", 1000 + index, index % 3000, index + 1
        log.append(submitted.format(cluster=cluster, time=stamp(t), name=name))
        log.append(executing.format(cluster=cluster, time=stamp(t + 5)))
        log.append(
            f"006 ({cluster}.000.000) {stamp(t + 6)} Image size of job updated: 2500\n"
            "\t3  -  MemoryUsage of job (MB)\n\t2156  -  ResidentSetSize of job (KB)\n...\n"
        )
        js.append(
            f"{BASE + t} {name} SUBMIT {cluster}.0 - - {seq}\n{BASE + t + 5} {name} EXECUTE {cluster}.0 - - {seq}\n"
        )
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
        log.append(terminated.format(cluster=cluster, time=stamp(t + 60), code=code))
        verdict = "JOB_FAILURE" if code else "JOB_SUCCESS"
        js.append(
            f"{BASE + t + 60} {name} JOB_TERMINATED {cluster}.0 - - {seq}\n"
            f"{BASE + t + 60} {name} {verdict} {code} - - {seq}\n"
        )
        outcomes.append((name, code, cluster))
    paths = directory / "big.status", directory / "dagflow.jobs.log", directory / "big.jobstate.log"
    texts = (status_file_text(outcomes, BASE + 3600), "".join(log), "".join(js))
    for path, text in zip(paths, texts, strict=True):
        path.write_text(text)
    return paths


def timed(function: Callable[[], Any], repeat: int = 3) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


def check(bound: dict[str, events.NodeJob], jobs: dict[str, events.NodeJob]) -> str:
    """Asserts the JobEventLog fold agrees with dagflow's scan; "" when it did, a cell note when it read no
    node at all (events.read_events_with_bindings reads only the older `DAG Node:` note)."""
    if bound:
        assert bound == jobs, "JobEventLog and the fast event log scan disagree"
        return ""
    print(
        "warning: events.read_events_with_bindings found no DAG node in the HTCondor 25 layout (it reads the "
        "`DAG Node:` note only, not StructuredNotes' DAGNodeName): its time is JobEventLog's reading of every "
        "event, but its agreement with dagflow's reader is not checked",
        file=sys.stderr,
    )
    return ", unchecked"


def measure(nodes: int, bindings: bool) -> list[tuple[str, str]]:
    """(row label, cell) for one node count: seconds, and sizes and speed-ups where they apply."""
    with tempfile.TemporaryDirectory() as tmp:
        status_path, log_path, js_path = write_files(Path(tmp), nodes)
        mb = {path: f"{path.stat().st_size / 1e6:.1f} MB" for path in (status_path, log_path, js_path)}
        t_status, snapshot = timed(lambda: status_files.read_node_status(status_path))
        t_events, jobs = timed(lambda: events.read_events(log_path))
        t_js, history = timed(lambda: jobstate.read_jobstate(js_path))
        assert snapshot is not None and len(snapshot.nodes) == nodes
        assert len(jobs) == nodes and history is not None and len(history.nodes) == nodes
        assert all(node.attempt == 1 for node in history.nodes.values())
        rows = [
            ("node status file", f"{t_status:.3f} s ({mb[status_path]})"),
            ("job event log", f"{t_events:.3f} s ({mb[log_path]})"),
            ("status file + event log (target < 1 s)", f"{t_status + t_events:.3f} s"),
            ("jobstate log", f"{t_js:.3f} s ({mb[js_path]})"),
            ("all three", f"{t_status + t_events + t_js:.3f} s"),
            ("all three, per node", f"{(t_status + t_events + t_js) / nodes * 1e6:.2f} µs"),
        ]
        if not bindings:
            return rows
        data = status_path.read_bytes()
        t_classad, reference = timed(lambda: status_files.parse_node_status_with_classad(data), repeat=1)
        t_jel, bound = timed(lambda: events.read_events_with_bindings(log_path), repeat=1)
        assert reference == snapshot.nodes, "classad2 and the fast status file reader disagree"
        rows.append(("classad2.parseAds, status file (baseline)", f"{t_classad:.3f} s ({t_classad / t_status:.0f}x)"))
        rows.append(
            (
                "htcondor2.JobEventLog, event log (baseline)",
                f"{t_jel:.3f} s ({t_jel / t_events:.0f}x{check(bound, jobs)})",
            )
        )
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100_000, 20_000])
    parser.add_argument("--skip-bindings", action="store_true", help="Do not time classad2/JobEventLog.")
    args = parser.parse_args()
    columns = {nodes: dict(measure(nodes, not args.skip_bindings)) for nodes in args.nodes}
    labels = list(next(iter(columns.values())))
    print("best of 3 runs (baselines: 1 run, and how many times slower than dagflow's reader)")
    print(f"{'reader':<44}" + "".join(f"{f'{nodes} nodes':>28}" for nodes in args.nodes))
    for label in labels:
        print(f"{label:<44}" + "".join(f"{columns[nodes][label]:>28}" for nodes in args.nodes))


if __name__ == "__main__":
    main()
