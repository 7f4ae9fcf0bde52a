"""The one reader of HTCondor job event logs (engines/condor/event_log.py) reads the events
htcondor2.JobEventLog reads, and so gives the usage records they give, line for line: on the pool's own
logs, on the layouts it reads itself (every variant of each event it knows), on the ones it declines and
leaves to the bindings (in log order all the same), on a log read in tiny pieces, and on a log the real pool
writes for a DAG whose node job was evicted and held (the pool test)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from dagflow.engines.condor import event_log as ev
from dagflow.engines.condor import usage_records as ur
from dagflow.engines.condor.event_log import segment_keys
from dagflow.engines.condor.usage_records import read_records, record_condor_usage, usage_records
from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.run.usage import encode_usage, read_usage
from tests.condor_pool import Pool
from tests.test_usage_condor import LOG

POOL_LOG = Path(__file__).parent / "data" / "condor-pool" / "region-retrain.dag.nodes.log"
# examples/gpu-train (3 epochs) on a pool with HTCondor's own GPU discovery and monitor, on an H100
# (tests/test_gpu_example_real.py): GPU usage rows, an Assigned column, input and output transfer events.
GPU_POOL_LOG = Path(__file__).parent / "data" / "condor-pool" / "gpu-train-h100.jobs.log"


def _plan(names: list[str], workdir: Path) -> Plan:
    steps = {
        step: StepInfo(
            name=step, kind="command", axes=(), resources=Resources(cpus=2, memory_mb=512, gpus=1),
            retries=0, retry_unless_exit=(), timeout_s=None, priority=0, metrics=None,
        )
        for step in ("train", "other")
    }  # fmt: skip
    nodes = {name: Node(name, "train" if name.startswith("t") else "other", ["true"], {}, {}) for name in names}
    return Plan(pipeline="t", run_id="r", source="p.yaml", steps=steps, nodes=nodes, workdir=str(workdir))


def _nodes_of(log: Path) -> list[str]:
    import re

    found = re.findall(rb'DAGNodeName = "([^"]*)"|DAG Node: (\S+)', log.read_bytes())
    return sorted({(ad or line).decode() for ad, line in found})


def _bindings_lines(log: Path, plan: Plan) -> list[bytes]:
    return [encode_usage(record) for record in usage_records(ev.bindings_events(log), plan)]


def _same_as_bindings(log: Path, plan: Plan | None = None) -> list[ur.Line]:
    """The text reader's records of the log, asserted to be the bindings' (lines, keys and attempts), as
    its events are (every kind, every field)."""
    assert list(ev.read_events(log)) == list(ev.bindings_events(log))
    plan = plan or _plan([name for name in _nodes_of(log) if name != "not-in-plan"], log.parent)
    text = read_records(log, plan)
    assert [line.text for line in text] == _bindings_lines(log, plan)
    for line in text:
        parsed = json.loads(line.text)
        assert (parsed["node"], parsed["key"], parsed["attempt"]) == (line.node, line.key, line.attempt)
    return text


HEAD = "{code} ({cluster}.000.000) {when} "


def _event(code: str, cluster: int, when: str, text: str) -> str:
    return HEAD.format(code=code, cluster=f"{cluster:03d}", when=when) + text + "...\n"


def _submit(cluster: int, name: str, when: str = "2026-11-24 05:11:59", note: str | None = None) -> str:
    note = note if note is not None else f'    [ DAGNodeName = "{name}"; JobBatchName = "b"; DAGManJobId = 7 ]\n'
    return _event(
        "000", cluster, when, "Job submitted from host: <127.0.0.1:44131?addrs=127.0.0.1-44131&alias=vm>\n" + note
    )


def _execute(
    cluster: int, when: str = "2026-11-24 05:12:03", slot: str = "slot1_5@vm", props: str | None = None
) -> str:
    props = (
        props
        if props is not None
        else "\tAvailableGPUs = {  }\n\tCpus = 2\n\tDisk = 1048576\n\tGPUs = 1\n\tMemory = 2048\n"
    )
    slot_line = f"\tSlotName: {slot}\n" if slot else ""
    return _event(
        "001",
        cluster,
        when,
        "Job executing on host: <127.0.0.1:40133?addrs=127.0.0.1-40133&alias=vm>\n" + slot_line + props,
    )


def _image(cluster: int, memory: int, when: str = "2026-11-24 05:12:08") -> str:
    return _event(
        "006", cluster, when,
        f"Image size of job updated: 2372200\n\t{memory}  -  MemoryUsage of job (MB)\n"
        "\t2369264  -  ResidentSetSize of job (KB)\n",
    )  # fmt: skip


RUSAGE = (
    "\t\tUsr 0 01:02:03, Sys 1 00:00:09  -  Run Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n"
    "\t\tUsr 0 01:02:03, Sys 1 00:00:09  -  Total Remote Usage\n"
    "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage\n"
)
BYTES = (
    "\t29  -  Run Bytes Sent By Job\n\t1913  -  Run Bytes Received By Job\n"
    "\t29  -  Total Bytes Sent By Job\n\t1913  -  Total Bytes Received By Job\n"
)


def _table(*rows: tuple[str, str, str, str]) -> str:
    """A usage table as HTCondor 25 writes it (formatUsageAd: every cell padded to its column's width)."""
    lines = [f"\tPartitionable Resources : {'Usage':>8} {'Request':>8} {'Allocated':>9} \n"]
    lines += [f"\t   {label:<20} : {use:>8} {request:>8} {allocated:>9} \n" for label, use, request, allocated in rows]
    return "".join(lines)


TABLE = _table(
    ("Cpus", "0.80", "2", "2"),
    ("Disk (KB)", "5120", "2048", "2048"),
    ("GPUs", "", "1", "1"),
    ("Memory (MB)", "3000", "4096", "4096"),
    ("TimeExecute (s)", "10", "", ""),
)
# HTCondor widens a column for a long value, adds the Assigned column for GPUs, and writes the GPU rows of a
# pool that monitors them (`Gpus (Average)` is GPUsUsage, case aside)
WIDE_TABLE = (
    "\tPartitionable Resources :        Usage      Request Allocated Assigned\n"
    "\t   Cpus                 :         1.25            4         4 \n"
    "\t   Disk (KB)            :   1234567890      2048000   2048000 \n"
    "\t   Gpus (Average)       :         0.50            2         2 GPU-1a2b,GPU-3c4d\n"
    "\t   GpusMemory (MB)      :        12000                         \n"
    "\t   Memory (MB)          :         9000         8192      8192 \n"
    "\t   TimeExecute (s)      :          120                         \n"
    "\t   TimeSlotBusy (s)     :          121                         \n"
)


NORMAL = "\t(1) Normal termination (return value 0)\n"


def _terminated(
    cluster: int, when: str = "2026-11-24 05:12:31", end: str = NORMAL, table: str = TABLE, between: str = ""
) -> str:
    return _event("005", cluster, when, "Job terminated.\n" + end + RUSAGE + BYTES + between + table)


def _evicted(cluster: int, when: str = "2026-11-24 05:12:45", vacated: bool = False) -> str:
    if vacated:  # as HTCondor 25 writes it
        return _event(
            "004", cluster, when,
            "Job was evicted. Code 1022 Subcode 0\n\t(0) CPU times\n"
            "\t\tUsr 0 00:00:05, Sys 0 00:00:00  -  Run Remote Usage\n"
            "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t0  -  Run Bytes Sent By Job\n"
            "\t0  -  Run Bytes Received By Job\n\tReason: Job vacated by schedd\n" + TABLE,
        )  # fmt: skip
    return _event(
        "004", cluster, when,
        "Job was evicted.\n\t(0) Job was not checkpointed.\n\t\tUsr 0 00:00:02, Sys 0 00:00:01  -  Run Remote Usage\n"
        "\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage\n\t0  -  Run Bytes Sent By Job\n"
        "\t0  -  Run Bytes Received By Job\n",
    )  # fmt: skip


MEMORY_HOLD = "\tdagflow: memory over\n\tCode 3 Subcode 1717\n"


def _held(cluster: int, body: str = MEMORY_HOLD, when: str = "2026-11-24 05:12:50") -> str:
    return _event("012", cluster, when, "Job was held.\n" + body)


def _released(cluster: int, when: str = "2026-11-24 05:12:55") -> str:
    return _event("013", cluster, when, "Job was released.\n\tvia condor_release (by user alice)\n")


# Every layout the text reader reads itself: both node notes, a time with fractions of a second, an
# abnormal termination with and without a core file, a wide table with GPU rows and Assigned column, no table
# at all, an eviction and holds (dagflow's memory hold, a reason without codes, "Reason unspecified", a hold
# while idle), a job whose latest image size has no MemoryUsage, other events between, a job of no node of
# the plan, and a non-DAG job. Jobs of one node interleave.
READ_LOG = "".join(
    [
        _submit(1, "t-wide"),
        _submit(2, "o-old", note="    DAG Node: o-old   \n"),
        _submit(3, "t-killed", when="2026-11-24 05:11:59.250"),
        _submit(4, "not-in-plan"),
        _submit(5, "", note=""),
        _execute(1, when="2026-11-24 05:12:03.999"),
        _execute(2, slot="", props="\tCpus = 1\n\tcpus = 3\n\tMemory = 64.5\n"),
        _execute(3, slot="slot2"),
        _execute(4),
        _execute(5),
        _image(1, 100),
        _image(2, 50),
        _event("006", 2, "2026-11-24 05:12:09", "Image size of job updated: 10\n\t5  -  ResidentSetSize of job (KB)\n"),
        _evicted(2),
        _terminated(1, table=WIDE_TABLE),
        _terminated(3, end="\t(0) Abnormal termination (signal 9)\n\t(0) No core file\n", table=""),
        _terminated(4),
        _terminated(5),
        _submit(6, "t-wide"),
        _held(6, body="\tinput missing\n\tCode 13 Subcode 2\n", when="2026-11-24 05:13:00"),  # idle: no record
        _released(6),
        _execute(6, when="2026-11-24 05:13:10"),
        _image(6, 700, when="2026-11-24 05:13:11"),
        _held(6, body="\tReason unspecified\n", when="2026-11-24 05:13:12"),
        _released(6),
        _execute(6, when="2026-11-24 05:13:20"),
        _held(6, body="\tsome reason, no codes\n", when="2026-11-24 05:13:21"),
        _released(6),
        _execute(6, when="2026-11-24 05:13:30"),
        _held(6, body="", when="2026-11-24 05:13:31"),
        _released(6),
        _execute(6, when="2026-11-24 05:13:40"),
        _image(6, 800, when="2026-11-24 05:13:41"),
        _held(6, when="2026-11-24 05:13:42"),
        _released(6),
        _execute(6, when="2026-11-24 05:13:43"),
        _evicted(6, when="2026-11-24 05:13:44", vacated=True),
        _held(6, body="\taudit by ops (by user alice)\n\tCode 1 Subcode 0\n", when="2026-11-24 05:13:44"),
        _event("009", 6, "2026-11-24 05:13:50", "Job was aborted.\n\tremoved\n"),
        _execute(2, when="2026-11-24 05:14:00"),
        _terminated(
            2, when="2026-11-24 05:14:10", end="\t(0) Abnormal termination (signal 6)\n\t(1) Corefile in: /tmp/core.7\n"
        ),
    ]
)


def test_a_gpu_monitoring_pool_s_log_reads_as_the_bindings_read_it() -> None:
    records = {json.loads(line.text)["node"]: json.loads(line.text) for line in _same_as_bindings(GPU_POOL_LOG)}
    assert len(records) == 10
    gpu = {
        node: (r["gpu_memory_peak_mb"], r["gpu_utilization_pct"])
        for node, r in records.items()
        if r["gpu_memory_peak_mb"]
    }
    assert gpu == {"train.us": (1319, 0.0), "train.br": (1317, 0.0)}  # HTCondor's GpusMemory and GPUs usage rows
    assert records["train.us"]["allocated"]["gpus"] == 1.0 and records["prepare.us"]["allocated"]["gpus"] == 0.0


def test_the_pool_s_logs_read_as_the_bindings_read_them(tmp_path: Path) -> None:
    assert len(_same_as_bindings(POOL_LOG)) == 12
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(LOG)
    assert [(line.node, line.key) for line in _same_as_bindings(log)] == [
        ("hog", "101.held1"), ("hog", "102"), ("flaky", "103.evicted1"), ("flaky", "103"),
    ]  # fmt: skip


def test_every_layout_the_reader_reads_is_the_bindings_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(READ_LOG)
    declined = []
    monkeypatch.setattr(ev._Reader, "bindings", lambda self, *args: declined.append(args) or [])
    text = _same_as_bindings(log)
    assert declined == []  # all read by the text reader
    assert [(line.node, line.key, line.attempt) for line in text] == [
        ("o-old", "2.evicted1", 1), ("t-wide", "1", 1), ("t-killed", "3", 1), ("t-wide", "6.held2", 2),
        ("t-wide", "6.held3", 3), ("t-wide", "6.held4", 4), ("t-wide", "6.held5", 5), ("t-wide", "6.evicted1", 6),
        ("o-old", "2", 2),
    ]  # fmt: skip
    wide = json.loads(text[1].text)
    assert wide["gpu_memory_peak_mb"] == 12000 and wide["gpu_utilization_pct"] == 25.0
    assert wide["allocated"] == {"cpus": 4.0, "memory_mb": 8192.0, "disk_mb": 2000.0, "gpus": 2.0}
    assert wide["extra"]["disk_used_mb"] == round(1234567890 / 1024, 1) and wide["wall_s"] == 120
    assert wide["cpu_s"] == 86400 + 3600 + 120 + 12 and wide["started"] % 1 == 0
    assert json.loads(text[8].text)["exit_code"] == -6 and json.loads(text[0].text)["host"] == "vm"


def test_reading_in_small_pieces_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(READ_LOG + DECLINED_LOG)
    whole = read_records(log, _plan(_nodes_of(log), tmp_path))
    monkeypatch.setattr(ev, "CHUNK", 100)  # smaller than an event: each piece is one event
    assert read_records(log, _plan(_nodes_of(log), tmp_path)) == whole


# Layouts the text reader declines: each such job is read by the bindings. Node `t-mix` has a job whose
# eviction the text reader read before its terminated event made it decline the job, between two jobs it
# reads: the records are numbered in log order all the same.
DECLINED_LOG = "".join(
    [
        _submit(201, "t-mmdd", when="11/24 05:11:59"),
        _execute(201, when="11/24 05:12:00"),
        _terminated(201, when="11/24 05:12:10"),
        _submit(202, "t-expr"),
        _execute(202, props="\tCpus = 2 * 1\n\tMemory = 128\n"),
        _held(202),
        _submit(203, "t-notes", note='    [ DAGNodeName = "t-notes"; JobBatchName = "b" ]\n    user notes here\n'),
        _execute(203),
        _terminated(203),
        _submit(204, "t-cell"),
        _execute(204),
        _terminated(204, table=TABLE.replace("    3000     4096", "undefined     4096")),
        _submit(206, "t-short"),  # a row shorter than its header's columns: HTCondor reads past its end
        _execute(206),
        _terminated(206, table=TABLE.replace(f"{'10':>8} {'':>8} {'':>9} ", "10")),
        _submit(205, "t-codes"),
        _execute(205),
        _held(205, body="\tbad codes\n\tCode x Subcode y\n"),
        _submit(301, "t-mix"),
        _submit(302, "t-mix"),
        _execute(301),
        _execute(302, when="2026-11-24 05:12:04"),
        _image(301, 321),
        _evicted(301),
        _terminated(302, when="2026-11-24 05:12:46"),
        _execute(301, when="2026-11-24 05:12:50"),
        # an unknown line before the table: the bindings stop reading the event there (no MemoryUsage)
        _terminated(301, when="2026-11-24 05:12:55", between="\tJob ran on a Tuesday\n"),
        _submit(303, "t-mix"),
        _execute(303, when="2026-11-24 05:13:00"),
        _terminated(303, when="2026-11-24 05:13:10"),
    ]
)


def test_what_the_reader_declines_the_bindings_read_in_log_order(tmp_path: Path) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(DECLINED_LOG)
    text = _same_as_bindings(log)
    assert [(line.node, line.key, line.attempt) for line in text if line.node == "t-mix"] == [
        ("t-mix", "301.evicted1", 1), ("t-mix", "302", 2), ("t-mix", "301", 3), ("t-mix", "303", 4),
    ]  # fmt: skip
    held = json.loads(next(line.text for line in text if line.node == "t-expr"))
    assert held["allocated"] == {"memory_mb": 128.0} and held["reason"] == "oom"  # `2 * 1` is no number
    crlf = tmp_path / "crlf.log"  # a log with carriage returns: all of it is the bindings'
    crlf.write_bytes(READ_LOG.replace("\n", "\r\n").encode())
    _same_as_bindings(crlf)


def test_small_cluster_ids_are_recorded_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The header writes ids under 100 as `003`; the record's key is `3`. The cheap scan must name the key
    the record has, or every status parses those jobs again (it did: a fresh pool's jobs are 1, 2, 3...)."""
    log = tmp_path / "dagflow.jobs.log"
    log.write_bytes(POOL_LOG.read_bytes())
    assert segment_keys(POOL_LOG.read_bytes()) == {str(cluster) for cluster in range(3, 15)}
    plan = _plan(_nodes_of(log), tmp_path)
    assert record_condor_usage(tmp_path, plan, log) == 12

    def parsed_again(*args: object) -> None:
        raise AssertionError("the log was parsed again")

    monkeypatch.setattr(ur, "read_records", parsed_again)
    assert record_condor_usage(tmp_path, plan, log) == 0
    assert len(read_usage(tmp_path)) == 12


def test_a_big_log_is_read_in_seconds_and_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """2000 jobs (8000 events): the text reader against the bindings' time on the same log, and no piece
    of the log read is much bigger than CHUNK."""
    events = []
    for index in range(2000):
        cluster = 1000 + index
        events += [
            _submit(cluster, f"t{index}"),
            _execute(cluster, slot=f"slot1_{index % 7}@vm", props=f"\tCpus = 2\n\tDisk = {index}\n\tMemory = 2048\n"),
            _image(cluster, index),
            _terminated(cluster, table=TABLE.replace("    3000", f"{index:8d}")),
        ]
    log = tmp_path / "dagflow.jobs.log"
    log.write_text("".join(events))
    plan = _plan([f"t{index}" for index in range(2000)], tmp_path)
    sizes = []
    pieces = ev.log_pieces
    monkeypatch.setattr(ev, "CHUNK", 64 * 1024)
    monkeypatch.setattr(
        ev, "log_pieces", lambda path, size=None: (sizes.append(len(p)) or p for p in pieces(path, size))
    )
    text = read_records(log, plan)
    assert [line.text for line in text] == _bindings_lines(log, plan)
    assert len(text) == 2000 and max(sizes) < 64 * 1024 + 4096  # how fast: benchmarks/status.py


# --- the real pool --------------------------------------------------------------------------------------

WAIT = """
import os, sys, time
for _ in range(3000):
    if os.path.exists(sys.argv[1]):
        break
    time.sleep(0.2)
"""

PIPELINE = """name: moved
steps:
  mover:
    command: [python, wait.py, release]
    resources: {cpus: 1, memory: 256MB}
  quick:
    command: [sh, -c, "exit 2"]
"""


@pytest.mark.condor_pool
def test_a_pool_log_with_an_eviction_and_a_hold_reads_as_the_bindings_read_it(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("usage-log")
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    (workdir / "wait.py").write_text(WAIT)
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]

    def mover() -> tuple[str, str, int] | None:
        """The mover node's job id, JobStatus (2: running) and NumJobStarts, once the schedd has it."""
        queue = condor_pool.run(
            ["condor_q", "-af", "DAGNodeName", "Iwd", "ClusterId", "JobStatus", "NumJobStarts"], check=False
        )
        for line in queue.stdout.splitlines():
            parts = line.split()
            if parts[:2] == ["mover", str(workdir)]:
                return parts[2], parts[3], int(parts[4]) if parts[4].isdigit() else 0
        return None

    def running(starts: int) -> str | None:
        """The job id once it runs its `starts`-th time (the idle state between runs may be too short to see)."""
        found = mover()
        return found[0] if found is not None and found[1] == "2" and found[2] >= starts else None

    job = condor_pool.wait_until(lambda: running(1), "the mover node to run")
    condor_pool.run(["condor_vacate_job", str(job)])  # evicted: it runs again
    condor_pool.wait_until(lambda: running(2), "the mover node to run again")
    condor_pool.run(["condor_hold", "-reason", "audit by ops", str(job)])  # held while running
    condor_pool.wait_until(lambda: (found := mover()) is not None and found[1] == "5", "the job to be held")
    # Released before the shadow has logged the hold (a loaded pool), the job has no 012 event at all.
    log = workdir / ".dagflow" / "runs" / run_id / "condor" / "dagflow.jobs.log"
    condor_pool.wait_until(lambda: b"Job was held." in log.read_bytes(), "the hold in the job event log")
    condor_pool.run(["condor_release", str(job)])
    condor_pool.wait_until(lambda: running(3), "the mover node to run a third time")
    (workdir / "release").write_text("")
    ended = condor_pool.ended(workdir, run_id)
    run_dir = Path(ended["run_dir"])
    assert log == run_dir / "condor" / "dagflow.jobs.log"
    plan = Plan.from_json((run_dir / "plan.json").read_text())
    text = _same_as_bindings(log, plan)
    declined: list[object] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ev._Reader, "bindings", lambda self, *args: declined.append(args) or [])
        list(ev.read_events(log))
    assert declined == []  # every event of this log read by the text reader itself
    # condor_hold of a running job: HTCondor 25 evicts it (004), then holds it (012) while it is idle
    assert b"Job was held.\n\taudit by ops" in log.read_bytes()
    kinds = [line.key.split(".", 1)[-1] if "." in line.key else "end" for line in text if line.node == "mover"]
    assert kinds == ["evicted1", "evicted2", "end"]
    # what the statuses recorded as the run went (each appending the segments ended since) is the same, once
    recorded = (run_dir / "usage.jsonl").read_bytes().splitlines(keepends=True)
    assert sorted(recorded) == sorted(line.text for line in text)
    assert [(record.node, record.attempt) for record in read_usage(run_dir) if record.node == "mover"] == [
        ("mover", 1), ("mover", 2), ("mover", 3),
    ]  # fmt: skip


def _gpu_train_plan(workdir: Path, checkpoint_exit_code: int | None) -> Plan:
    plan = _plan(_nodes_of(GPU_POOL_LOG), workdir)
    plan.steps["train"] = dataclasses.replace(plan.steps["train"], checkpoint_exit_code=checkpoint_exit_code)
    return plan


@pytest.mark.parametrize("through", ["plan", "index"])
def test_a_self_checkpointing_job_s_wall_time_covers_every_restart(tmp_path: Path, through: str) -> None:
    """HTCondor restarts a self-checkpointing job in place and its TimeExecute counts the last execution
    alone (train.us on the H100 pool: 8 s of a three-epoch 28 s run, with 18 CPU seconds: 2.25 cores used
    of 2 requested, read so before). Such a job's wall is execute to end; a plain job keeps TimeExecute."""
    from dagflow.plan.index import PlanIndex

    for code, wall_us, wall_br in ((85, 28.0, 25.0), (None, 8.0, 9.0)):
        plan = _gpu_train_plan(tmp_path, code)
        source = plan if through == "plan" else PlanIndex.from_dict(json.loads(PlanIndex.of(plan).to_json()))
        records = {r.node: r for r in usage_records(ev.bindings_events(GPU_POOL_LOG), source)}
        text = {json.loads(line.text)["node"]: json.loads(line.text) for line in read_records(GPU_POOL_LOG, source)}
        assert (records["train.us"].wall_s, records["train.br"].wall_s) == (wall_us, wall_br)
        assert (text["train.us"]["wall_s"], text["train.br"]["wall_s"]) == (wall_us, wall_br)
        assert records["train.us"].cpu_s == 18.0
        assert records["prepare.us"].wall_s == 0.0  # not a checkpointing step: TimeExecute, as before
