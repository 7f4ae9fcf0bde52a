"""How long `dagflow status` takes on a big condor run (100k and 20k nodes by default): the whole command,
and the readers of DAGMan's files it spends its time in.

Builds, in a temporary directory, the run directory `dagflow submit --engine condor` leaves once its DAG
has run: a pipeline file of N nodes (a matrix fan-out, REGIONS regions x N / (2 REGIONS) shards, a train and
an evaluate node for each), planned by dagflow's own load_spec and expand, prepared by the condor engine's
run session (plan.json, the journal, the engine record, the compiled .dag and .sub files) and recorded as
submitted (condor/run.json: DAGMan job 100). Into it go the files DAGMan and the schedd would have written,
where status reads them: the node status file, the nodes' job event log, the jobstate log, DAGMan's own
event log and .dagman.out, the rescue DAG, and the stderr of the nodes that failed. In those files every
node that ran was submitted, executed, had one image-size update and terminated; 2% of the jobs were held
with a reason, released and executed again, 1% evicted and executed again; 1% of the nodes exited with
code 1 (the nodes below them are futile), and DAGMan exited with status 1.

Then it times:

- `python -m dagflow status RUN` and `python -m dagflow status RUN --json`, as a user runs them (a fresh
  interpreter each time, stdout to a file, started from a small launcher so that its peak RSS is its own,
  not the benchmark's): wall time, best of 3, and peak RSS (ru_maxrss), against the target (100k nodes: at
  most 1 s and 300 MB). The first status after the DAG ran, which also ingests the run (records the
  nodes' usage into usage.jsonl, journals them, and records what the journal cannot say beside it), and
  the first --json after it, which reads every node's usage, are timed on their own; the repeated ones are
  what a user waits for after that. Then the run directory is put back as the DAG left it and timed as
  `dagflow submit` leaves it: the status warmer (engines/condor/status_warmer.py), which ingests the run
  once when the DAGMan job's log says it ended, in the background, and the user's first status and --json
  after it. Each
  command's output is checked: its counts per state are those the synthetic files say (the text view's rows
  and its `... and N more` line), and --json lists every node, the same each time.
- dagflow's readers of the node status file, the event log and the jobstate log, and their sum;
- the bindings' readers on the same files, as the baseline: classad2.parseAds and
  htcondor2.JobEventLog (checked to agree with dagflow's results on every node).

The load average (/proc/loadavg) is printed before and after each node count: the numbers are only
comparable between runs under the same load.

The node status file is written in the layout a real DAGMan writes: its ads are the ads of
tests/data/condor-pool/region-retrain.status (written by HTCondor 25.14), with their values replaced,
comments and all. The job event log's submit, execute and terminated events are those of
tests/data/condor-pool/region-retrain.dag.nodes.log (written by the same pool), with their job ids,
times, node names and exit codes replaced: HTCondor 25 names the node in the submit event's ClassAd note,
`[ DAGNodeName = "train.r00.0"; JobBatchName = "..." ]`, not in an older `DAG Node: ...` line. The image
size, hold, release and eviction events, which that file has none of, keep the layout the event log
documentation gives. The jobstate log numbers submissions across the whole DAG, as DAGMan does.

To time another checkout's dagflow (the same run directory, built by that code), run this file with
PYTHONPATH=THAT_CHECKOUT: the commands inherit it.

    python benchmarks/status.py [--nodes 100000 20000] [--skip-bindings] [--keep DIR]

It byte-compiles the dagflow it times first (as an installed one is), and --keep leaves each run directory
in DIR/<nodes> for profiling.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagflow
from dagflow.engines.condor import event_log as events
from dagflow.engines.condor import jobstate, status_files

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
REGIONS = 10  # the pipeline's region axis; its shard axis has N / (2 REGIONS) values
RUN_ID = "bench"
DAGMAN_CLUSTER = 100
FIRST_NODE_CLUSTER = 1000
TARGET_NODES = 100_000  # the node count the targets are set for
TARGET_S = 1.0
TARGET_MB = 300.0
REPEAT = 3


def stamp(offset: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(BASE + offset))


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
            "NodesFutile": "{futile}",
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


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a node ended: its job's exit code and cluster, or code None for a futile node (no job)."""

    name: str
    code: int | None
    cluster: int


def status_file_text(outcomes: list[Outcome], written_at: int) -> str:
    """The node status file of nodes that all finished (done, error or futile)."""
    dag, node, end = status_templates()
    written_text = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(written_at))
    futile = sum(1 for outcome in outcomes if outcome.code is None)
    failed = sum(1 for outcome in outcomes if outcome.code)
    done = len(outcomes) - failed - futile
    parts = [
        dag.format(
            time=written_at,
            Timestamp_comment=written_text,
            total=len(outcomes),
            done=done,
            failed=failed,
            futile=futile,
        )
    ]
    for outcome in outcomes:
        if outcome.code is None:
            status, details = status_files.FUTILE, ""
        elif outcome.code:
            status, details = status_files.ERROR, f"Job proc ({outcome.cluster}.0.0) failed with status {outcome.code}"
        else:
            status, details = status_files.DONE, ""
        comment = STATUS_COMMENTS[status]
        parts.append(
            node.format(name=outcome.name, status=status, NodeStatus_comment=comment, details=details, retries=0)
        )
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


def node_outcomes(nodes: list[tuple[str, list[str]]]) -> list[Outcome]:
    """(name, parents) in topological order -> how each ended: the node at index i exits 1 when
    i % 100 == 11, the nodes below a failed one are futile, the others exit 0."""
    below_failure: set[str] = set()
    outcomes: list[Outcome] = []
    cluster = FIRST_NODE_CLUSTER
    for index, (name, parents) in enumerate(nodes):
        if any(parent in below_failure for parent in parents):
            below_failure.add(name)
            outcomes.append(Outcome(name, None, 0))
            continue
        code = 1 if index % 100 == 11 else 0
        if code:
            below_failure.add(name)
        outcomes.append(Outcome(name, code, cluster))
        cluster += 1
    return outcomes


def write_node_files(outcomes: list[Outcome], status_path: Path, log_path: Path, js_path: Path) -> None:
    """The node status file, the nodes' job event log and the jobstate log of a DAG that has ended."""
    submitted, executing, terminated = event_templates()
    log: list[str] = []
    js: list[str] = [f"{BASE} INTERNAL *** DAGMAN_STARTED {DAGMAN_CLUSTER}.0 ***\n"]
    ran = [outcome for outcome in outcomes if outcome.code is not None]
    for index, outcome in enumerate(ran):
        name, cluster, code, t, seq = outcome.name, outcome.cluster, outcome.code, index % 3000, index + 1
        log.append(submitted.format(cluster=cluster, time=stamp(t), name=name))
        log.append(executing.format(cluster=cluster, time=stamp(t + 5)))
        log.append(
            f"006 ({cluster}.000.000) {stamp(t + 6)} Image size of job updated: 2500\n"
            "\t3  -  MemoryUsage of job (MB)\n\t2156  -  ResidentSetSize of job (KB)\n...\n"
        )
        js.append(
            f"{BASE + t} {name} SUBMIT {cluster}.0 - - {seq}\n{BASE + t + 5} {name} EXECUTE {cluster}.0 - - {seq}\n"
        )
        if index % 50 == 7:  # held while running, released, and run again
            log.append(
                f"012 ({cluster}.000.000) {stamp(t + 7)} Job was held.\n"
                "\tError from slot1@exec.example.org: Job has gone over cgroup memory limit of 1024 megabytes.\n"
                "\tCode 34 Subcode 0\n...\n"
                f"013 ({cluster}.000.000) {stamp(t + 8)} Job was released.\n\tvia condor_release (by user alice)\n...\n"
            )
            log.append(executing.format(cluster=cluster, time=stamp(t + 8)))
            js.append(
                f"{BASE + t + 7} {name} JOB_HELD {cluster}.0 - - {seq}\n"
                f"{BASE + t + 8} {name} JOB_RELEASED {cluster}.0 - - {seq}\n"
                f"{BASE + t + 8} {name} EXECUTE {cluster}.0 - - {seq}\n"
            )
        if index % 100 == 3:  # evicted, and run again
            log.append(
                f"004 ({cluster}.000.000) {stamp(t + 9)} Job was evicted.\n\t(0) Job was not checkpointed.\n"
                "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Remote Usage\n"
                "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
                "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n...\n"
            )
            log.append(executing.format(cluster=cluster, time=stamp(t + 10)))
            js.append(
                f"{BASE + t + 9} {name} JOB_EVICTED {cluster}.0 - - {seq}\n"
                f"{BASE + t + 10} {name} EXECUTE {cluster}.0 - - {seq}\n"
            )
        log.append(terminated.format(cluster=cluster, time=stamp(t + 60), code=code))
        verdict = "JOB_FAILURE" if code else "JOB_SUCCESS"
        js.append(
            f"{BASE + t + 60} {name} JOB_TERMINATED {cluster}.0 - - {seq}\n"
            f"{BASE + t + 60} {name} {verdict} {code} - - {seq}\n"
        )
    js.append(f"{BASE + 3600} INTERNAL *** DAGMAN_FINISHED {dagman_exit(outcomes)} ***\n")
    status_path.write_text(status_file_text(outcomes, BASE + 3600))
    log_path.write_text("".join(log))
    js_path.write_text("".join(js))


def write_files(directory: Path, nodes: int) -> tuple[Path, Path, Path]:
    """The node status file, job event log and jobstate log of `nodes` independent nodes n000000...
    (tests/test_condor_status.py checks them against the bindings' readers)."""
    paths = directory / "big.status", directory / "dagflow.jobs.log", directory / "big.jobstate.log"
    write_node_files(node_outcomes([(f"n{index:06d}", []) for index in range(nodes)]), *paths)
    return paths


def dagman_exit(outcomes: list[Outcome]) -> int:
    return 1 if any(outcome.code for outcome in outcomes) else 0


def write_dagman_files(dag: Path, outcomes: list[Outcome]) -> None:
    """What the DAGMan job leaves beside the DAG: its own event log (written by the schedd), the end of its
    debug log, and the rescue DAG of a DAG that failed."""
    code = dagman_exit(outcomes)
    host = "<10.0.0.5:9618?addrs=10.0.0.5-9618&noUDP&sock=schedd_1801_5c2e>"
    Path(f"{dag}.dagman.log").write_text(
        f"000 ({DAGMAN_CLUSTER:03d}.000.000) {stamp(-2)} Job submitted from host: {host}\n...\n"
        f"001 ({DAGMAN_CLUSTER:03d}.000.000) {stamp(0)} Job executing on host: {host}\n...\n"
        f"005 ({DAGMAN_CLUSTER:03d}.000.000) {stamp(3601)} Job terminated.\n"
        f"\t(1) Normal termination (return value {code})\n"
        "\t\tUsr 0 00:00:41, Sys 0 00:00:09  -  Run Remote Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
        "\t\tUsr 0 00:00:41, Sys 0 00:00:09  -  Total Remote Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
        "\t0  -  Run Bytes Sent By Job\n\t0  -  Run Bytes Received By Job\n"
        "\t0  -  Total Bytes Sent By Job\n\t0  -  Total Bytes Received By Job\n...\n"
    )
    started = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(BASE))
    ended = time.strftime("%m/%d/%y %H:%M:%S", time.localtime(BASE + 3600))
    done = sum(1 for outcome in outcomes if outcome.code == 0)
    failed = sum(1 for outcome in outcomes if outcome.code)
    futile = len(outcomes) - done - failed
    status = "2 (DAG_STATUS_NODE_FAILED)" if code else "0 (DAG_STATUS_OK)"
    Path(f"{dag}.dagman.out").write_text(
        f"{started} ******************************************************\n"
        f"{started} ** condor_scheduniv_exec.{DAGMAN_CLUSTER}.0 (CONDOR_DAGMAN) STARTING UP\n"
        f"{started} Workflow batch-id: <{DAGMAN_CLUSTER}.0>\n"
        f"{ended} DAG status: {status}\n"
        f"{ended} Of {len(outcomes)} nodes total:\n"
        f"{ended}  Done     Pre   Queued    Post   Ready   Un-Ready   Failed   Futile\n"
        f"{ended}   ===     ===      ===     ===     ===        ===      ===      ===\n"
        f"{ended} {done:>6} {0:>7} {0:>8} {0:>7} {0:>7} {0:>10} {failed:>8} {futile:>8}\n"
        f"{ended} **** condor_dagman (condor_DAGMAN) pid 2259 EXITING WITH STATUS {code}\n"
    )
    if code:
        lines = [
            f"# Rescue DAG file, created after running\n#   the {dag} DAG file",
            *(f"DONE {outcome.name}" for outcome in outcomes if outcome.code == 0),
        ]
        Path(f"{dag}.rescue001").write_text("\n".join(lines) + "\n")


def pipeline_yaml(nodes: int) -> str:
    shards, rest = divmod(nodes, 2 * REGIONS)
    if rest or not shards:
        raise SystemExit(f"--nodes: {nodes} is not a positive multiple of {2 * REGIONS}")
    regions = ", ".join(f"r{index:02d}" for index in range(REGIONS))
    shard_values = ", ".join(f'"{index}"' for index in range(shards))
    return f"""\
name: bench
matrix:
  region: [{regions}]
  shard: [{shard_values}]
steps:
  train:
    kind: train
    command: python train.py --region {{region}} --shard {{shard}} --out models/{{region}}/{{shard}}
    resources: {{cpus: 2, memory: 4GB}}
  evaluate:
    kind: evaluate
    needs: [train]
    command: python eval.py models/{{region}}/{{shard}} --out models/{{region}}/{{shard}}/metrics.json
"""


@dataclass(frozen=True, slots=True)
class BuiltRun:
    runs_dir: Path
    run_id: str
    status_file: Path
    event_log: Path
    jobstate_log: Path
    nodes: int
    jobs: int  # nodes that ran a job (not futile)
    expected: dict[str, int]  # nodes per state, as status should count them

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.run_id


def build_run(directory: Path, nodes: int) -> BuiltRun:
    """A condor run directory of `nodes` nodes whose DAG has run (see the module docstring)."""
    from dagflow.engines.condor.engine import CondorEngine, load_prepared
    from dagflow.engines.condor.submit_writer import Layout
    from dagflow.engines.registry import run_session
    from dagflow.plan.expand import expand
    from dagflow.spec import load_spec

    pipeline = directory / "pipeline.yaml"
    pipeline.write_text(pipeline_yaml(nodes))
    plan = expand(load_spec(pipeline), run_id=RUN_ID)
    assert len(plan.nodes) == nodes, f"the pipeline expanded to {len(plan.nodes)} nodes, not {nodes}"
    engine = CondorEngine(directory / "runs")
    prepared = load_prepared(run_session(engine).create(plan, directory / "runs")[0])
    prepared.record.add_submission(prepared.layout.run_dir, DAGMAN_CLUSTER)
    files = prepared.record.files
    event_log = Layout.for_plan(plan, prepared.dag.parent).event_log
    outcomes = node_outcomes([(node.name, node.parents) for node in plan.nodes.values()])
    write_node_files(outcomes, files.node_status, event_log, files.jobstate_log)
    write_dagman_files(prepared.dag, outcomes)
    for outcome in outcomes:
        if outcome.code:
            prepared.layout.stderr_path(outcome.name).write_text(
                f"Traceback (most recent call last):\nValueError: {outcome.name} diverged\n"
            )
    counted = Counter("failed" if o.code else "upstream_failed" if o.code is None else "succeeded" for o in outcomes)
    expected = {state: counted[state] for state in ("succeeded", "failed", "upstream_failed") if counted[state]}
    jobs = sum(1 for outcome in outcomes if outcome.code is not None)
    return BuiltRun(
        prepared.layout.runs_dir, RUN_ID, files.node_status, event_log, files.jobstate_log, nodes, jobs, expected
    )


def timed(function: Callable[[], Any], repeat: int = REPEAT) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - started)
    return best, result


@dataclass(frozen=True, slots=True)
class Ran:
    seconds: float  # wall time
    cpu_s: float  # user + system CPU time: on a loaded machine, steadier than the wall time
    peak_mb: float  # the child's ru_maxrss
    stdout: str


# Runs the command and reports its own rusage. The benchmark itself holds hundreds of MB (the plan it built), and
# a child exec'd straight from it starts its peak RSS (ru_maxrss) at that: one exec'd from this small launcher
# starts it at the launcher's few MB, as one started from a shell does.
LAUNCHER = """
import json, os, sys, time
started = time.perf_counter()
pid = os.posix_spawn(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
seconds = time.perf_counter() - started
with open(sys.argv[1], "w") as out:
    json.dump([os.waitstatus_to_exitcode(status), seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss], out)
"""


def run_command(argv: list[str], cwd: Path) -> Ran:
    """Run argv as a child process (stdout to a file, as a pipe would take it); its wall time and peak RSS."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile() as report:
        launcher = [sys.executable, "-I", "-S", "-c", LAUNCHER, report.name, *argv]
        subprocess.run(launcher, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, check=False)
        code, seconds, cpu_s, peak_kib = json.loads(Path(report.name).read_text() or "[1, 0, 0, 0]")
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if code != 0 or stderr:
        raise SystemExit(f"{' '.join(argv)} exited {code}:\n{stderr}{stdout[-2000:]}")
    return Ran(seconds, cpu_s, peak_kib / 1024, stdout)  # KiB on Linux


def best_of(argv: list[str], cwd: Path, repeat: int = REPEAT) -> tuple[Ran, float, float]:
    """The fastest of `repeat` runs, the least CPU time and the highest peak RSS of them."""
    runs = [run_command(argv, cwd) for _ in range(repeat)]
    return min(runs, key=lambda ran: ran.seconds), min(ran.cpu_s for ran in runs), max(ran.peak_mb for ran in runs)


def check_text(text: str, built: BuiltRun) -> None:
    """The text view's counts line, and its table: the nodes that did not succeed, one row each, and a line
    `... and N more nodes (N1 failed, N2 upstream-failed)` for those past the rows it shows."""
    summary = "  ".join(f"{state.replace('_', '-')} {count}" for state, count in built.expected.items())
    assert f"{summary}  (total {built.nodes})" in text, f"no `{summary}` line in:\n{text[:2000]}"
    rows = Counter(line.split()[1] for line in text.splitlines() if re.match(r"(train|evaluate)\.r\d\d\.\d+ ", line))
    more = re.search(r"^\.\.\. and (\d+) more nodes? \(([^)]*)\) not listed", text, re.MULTILINE)
    if more is not None:
        for part in more.group(2).split(", "):
            count, state = part.split()
            rows[state] += int(count)
        assert sum(rows.values()) - int(more.group(1)) <= 50, "more rows than a big run's view lists"
    listed = {state.replace("_", "-"): count for state, count in built.expected.items() if state != "succeeded"}
    assert rows == listed, f"rows per state {dict(rows)}, expected {listed}"


def check_json(text: str, built: BuiltRun) -> None:
    summary = json.loads(text)
    assert summary["counts"] == built.expected, f"counts {summary['counts']}, expected {built.expected}"
    assert summary["total"] == built.nodes and summary["state"] == "failed", (summary["total"], summary["state"])
    states = Counter(node["state"] for node in summary["nodes"])
    assert len(summary["nodes"]) == built.nodes and states == built.expected, states
    used = sum(1 for node in summary["nodes"] if node["usage"] is not None)
    assert used == built.jobs, f"{used} nodes with usage, expected {built.jobs}"


def cell(ran: Ran, cpu_s: float, peak_mb: float, nodes: int) -> str:
    text = f"{ran.seconds:.2f} s (cpu {cpu_s:.2f} s), {peak_mb:.0f} MB"
    if nodes == TARGET_NODES:
        met = ran.seconds <= TARGET_S and peak_mb <= TARGET_MB
        text += " ok" if met else " OVER"
    return text


def measure_command(built: BuiltRun, cwd: Path) -> list[tuple[str, str]]:
    """The whole `dagflow status` command, as a user runs it: the first after the DAG ran, then again."""
    base = [sys.executable, "-m", "dagflow"]
    status = [*base, "status", built.run_id, "--runs-dir", str(built.runs_dir)]
    first = run_command(status, cwd)  # ingests: usage.jsonl from the event log, the journal, observed.json
    check_text(first.stdout, built)
    first_json = run_command([*status, "--json"], cwd)  # reads every node's usage
    check_json(first_json.stdout, built)
    text, text_cpu, text_mb = best_of(status, cwd)
    check_text(text.stdout, built)
    as_json, json_cpu, json_mb = best_of([*status, "--json"], cwd)
    check_json(as_json.stdout, built)
    assert as_json.stdout == first_json.stdout, "a repeated `status --json` differs from the first"
    help_run, help_cpu, help_mb = best_of([*base, "--help"], cwd)
    # As `dagflow submit` leaves it: the status warmer waits for the DAGMan job's end (its log says so
    # already), ingests the run once, in the background; then the user's first status and --json.
    unkept(built)
    warm = [sys.executable, "-m", "dagflow.engines.condor.status_warmer", str(built.run_dir), str(DAGMAN_CLUSTER)]
    warmer = run_command(warm, cwd)
    warmed = run_command(status, cwd)
    check_text(warmed.stdout, built)
    warmed_json = run_command([*status, "--json"], cwd)
    assert warmed_json.stdout == first_json.stdout, "`status --json` after the warmer differs"
    return [
        ("`dagflow status` (repeated)", cell(text, text_cpu, text_mb, built.nodes)),
        ("`dagflow status --json` (repeated)", cell(as_json, json_cpu, json_mb, built.nodes)),
        ("first `dagflow status`, no warmer (ingests)", cell(first, first.cpu_s, first.peak_mb, built.nodes)),
        ("first `dagflow status --json` after it", cell(first_json, first_json.cpu_s, first_json.peak_mb, 0)),
        ("status warmer at the DAG's end (in the background)", cell(warmer, warmer.cpu_s, warmer.peak_mb, 0)),
        ("first `dagflow status` after the warmer", cell(warmed, warmed.cpu_s, warmed.peak_mb, built.nodes)),
        (
            "first `dagflow status --json` after the warmer",
            cell(warmed_json, warmed_json.cpu_s, warmed_json.peak_mb, 0),
        ),
        ("`dagflow --help` (interpreter, CLI imports)", cell(help_run, help_cpu, help_mb, 0)),
    ]


def unkept(built: BuiltRun) -> None:
    """The run directory as the DAG left it: nothing ingested (no usage, no journal, no observed record)."""
    from dagflow.run.observed import OBSERVED_FILE
    from dagflow.run.usage import usage_path

    for path in (usage_path(built.run_dir), built.run_dir / "journal.jsonl", built.run_dir / OBSERVED_FILE):
        path.unlink()


def measure_readers(built: BuiltRun, bindings: bool) -> list[tuple[str, str]]:
    """dagflow's readers of DAGMan's files (and the bindings', the baseline), on the run's own files."""
    status_path, log_path, js_path = built.status_file, built.event_log, built.jobstate_log
    mb = {path: f"{path.stat().st_size / 1e6:.1f} MB" for path in (status_path, log_path, js_path)}
    t_status, snapshot = timed(lambda: status_files.read_node_status(status_path))
    t_events, jobs = timed(lambda: events.node_jobs(events.read_events(log_path, kinds=events.JOB_KINDS)))
    t_js, history = timed(lambda: jobstate.read_jobstate(js_path))
    assert snapshot is not None and len(snapshot.nodes) == built.nodes
    assert len(jobs) == built.jobs and history is not None and len(history.nodes) == built.jobs
    assert all(node.attempt == 1 for node in history.nodes.values())
    rows = [
        ("node status file", f"{t_status:.3f} s ({mb[status_path]})"),
        ("job event log", f"{t_events:.3f} s ({mb[log_path]})"),
        ("jobstate log", f"{t_js:.3f} s ({mb[js_path]})"),
        ("the three readers", f"{t_status + t_events + t_js:.3f} s"),
        ("the three readers, per node", f"{(t_status + t_events + t_js) / built.nodes * 1e6:.2f} µs"),
    ]
    if not bindings:
        return rows
    from dagflow.engines.condor.usage_records import read_records, usage_records
    from dagflow.run.layout import RunLayout
    from dagflow.run.status import load_plan_index

    index = load_plan_index(RunLayout.from_run_dir(built.run_dir))
    t_text, lines = timed(lambda: read_records(log_path, index), repeat=1)
    t_bound, records = timed(lambda: list(usage_records(events.bindings_events(log_path), index)), repeat=1)
    assert len(lines) == len(records), "the text reader and the bindings make different usage records"
    rows.append(("usage records, text reader (event_log.py)", f"{t_text:.3f} s ({len(lines)} records)"))
    rows.append(("usage records, htcondor2.JobEventLog (baseline)", f"{t_bound:.3f} s ({t_bound / t_text:.1f}x)"))
    data = status_path.read_bytes()
    t_classad, reference = timed(lambda: status_files.parse_node_status_with_classad(data), repeat=1)
    t_jel, bound = timed(lambda: events.node_jobs(events.bindings_events(log_path)), repeat=1)
    assert reference == snapshot.nodes, "classad2 and the fast status file reader disagree"
    assert bound == jobs, "JobEventLog and the text reader disagree"
    rows.append(("classad2.parseAds, status file (baseline)", f"{t_classad:.3f} s ({t_classad / t_status:.0f}x)"))
    rows.append(
        (
            "htcondor2.JobEventLog, event log (baseline)",
            f"{t_jel:.3f} s ({t_jel / t_events:.0f}x)",
        )
    )
    return rows


def measure(nodes: int, bindings: bool, keep: Path | None = None) -> list[tuple[str, str]]:
    """(row label, cell) for one node count; keep: build the run in keep/<nodes> and leave it there."""
    with tempfile.TemporaryDirectory(prefix="dagflow-status-bench-") as tmp:
        directory = Path(tmp) if keep is None else keep / str(nodes)
        directory.mkdir(parents=True, exist_ok=True)
        built = build_run(directory, nodes)
        if keep is not None:
            print(f"run directory kept: {built.runs_dir / built.run_id}", file=sys.stderr)
        before = load_average()
        rows = [("load average before", before), *measure_command(built, directory)]
        rows += measure_readers(built, bindings)
        rows.append(("load average after", load_average()))
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[TARGET_NODES, 20_000])
    parser.add_argument("--skip-bindings", action="store_true", help="Do not time classad2/JobEventLog.")
    parser.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="Build each run in DIR/<nodes> (which must not hold one yet) and keep it, for profiling.",
    )
    args = parser.parse_args()
    keep = None if args.keep is None else args.keep.absolute()
    # The commands' imports read bytecode, as an installed dagflow's do (PYTHONDONTWRITEBYTECODE or not).
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(dagflow.__file__).parent)], check=True)
    columns = {nodes: dict(measure(nodes, not args.skip_bindings, keep)) for nodes in args.nodes}
    labels = list(next(iter(columns.values())))
    print(
        f"commands: best of {REPEAT} runs (wall time, least CPU time, highest peak RSS); readers: best of {REPEAT} "
        "(baselines: 1 run, and how many times slower than dagflow's reader)"
    )
    print(f"targets at {TARGET_NODES} nodes: each `dagflow status` command <= {TARGET_S:g} s, {TARGET_MB:g} MB")
    print(f"{'':<52}" + "".join(f"{f'{nodes} nodes':>34}" for nodes in args.nodes))
    for label in labels:
        print(f"{label:<52}" + "".join(f"{columns[nodes][label]:>34}" for nodes in args.nodes))


if __name__ == "__main__":
    main()
