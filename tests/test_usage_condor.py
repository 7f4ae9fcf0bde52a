"""HTCondor usage records (engines/condor/usage_records.py): from the nodes' job event log, read by the real
htcondor2.JobEventLog, into usage.jsonl once per job segment however often status reads the log.

The pool test proves it end to end: a node that holds 200 MB shows a peak in that range, and the
requested and allocated cpus and memory are the terminated event's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dagflow.engines.condor.event_log import segment_keys
from dagflow.engines.condor.usage_records import record_condor_usage
from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.run.usage import read_usage
from tests.condor_pool import Pool

# A node's job held while running (dagflow's memory hold), a second job of the node that ran to its end,
# one evicted then terminated by a signal, and a job held before it ever ran: the text HTCondor writes.
LOG = """\
000 (101.000.000) 2026-11-24 05:11:59 Job submitted from host: <127.0.0.1:44131?addrs=127.0.0.1-44131&alias=vm>
    [ DAGNodeName = "hog"; JobBatchName = "b" ]
...
001 (101.000.000) 2026-11-24 05:12:03 Job executing on host: <127.0.0.1:40133?addrs=127.0.0.1-40133&alias=vm>
\tSlotName: slot1_5@vm
\tCpus = 1
\tDisk = 1048576
\tGPUs = 0
\tMemory = 2048
...
006 (101.000.000) 2026-11-24 05:12:08 Image size of job updated: 2372200
\t2314  -  MemoryUsage of job (MB)
\t2369264  -  ResidentSetSize of job (KB)
...
012 (101.000.000) 2026-11-24 05:12:08 Job was held.
\tdagflow: memory usage 2314 MB over the 2048 MB provisioned
\tCode 3 Subcode 1717
...
009 (101.000.000) 2026-11-24 05:12:13 Job was aborted.
\tremoved
...
000 (102.000.000) 2026-11-24 05:12:20 Job submitted from host: <127.0.0.1:44131?addrs=127.0.0.1-44131&alias=vm>
    [ DAGNodeName = "hog"; JobBatchName = "b" ]
...
001 (102.000.000) 2026-11-24 05:12:21 Job executing on host: <127.0.0.1:40133?addrs=127.0.0.1-40133&alias=vm>
\tSlotName: slot1_2@vm
\tCpus = 2
\tDisk = 2048
\tGPUs = 1
\tMemory = 4096
...
005 (102.000.000) 2026-11-24 05:12:31 Job terminated.
\t(1) Normal termination (return value 0)
\t\tUsr 0 00:00:07, Sys 0 00:00:01  -  Run Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
\t\tUsr 0 00:00:07, Sys 0 00:00:01  -  Total Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
\t29  -  Run Bytes Sent By Job
\t1913  -  Run Bytes Received By Job
\t29  -  Total Bytes Sent By Job
\t1913  -  Total Bytes Received By Job
\tPartitionable Resources :    Usage  Request Allocated
\t   Cpus                 :     0.80        2         2
\t   Disk (KB)            :     5120     2048      2048
\t   GPUs                 :                 1         1
\t   Memory (MB)          :     3000     4096      4096
\t   TimeExecute (s)      :       10
...
000 (103.000.000) 2026-11-24 05:12:40 Job submitted from host: <127.0.0.1:44131?addrs=127.0.0.1-44131&alias=vm>
    [ DAGNodeName = "flaky"; JobBatchName = "b" ]
...
001 (103.000.000) 2026-11-24 05:12:41 Job executing on host: <127.0.0.1:40133?addrs=127.0.0.1-40133&alias=vm>
\tSlotName: slot1_3@vm
\tCpus = 1
\tDisk = 1024
\tGPUs = 0
\tMemory = 128
...
004 (103.000.000) 2026-11-24 05:12:45 Job was evicted.
\t(0) Job was not checkpointed.
\t\tUsr 0 00:00:02, Sys 0 00:00:00  -  Run Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
\t0  -  Run Bytes Sent By Job
\t0  -  Run Bytes Received By Job
...
001 (103.000.000) 2026-11-24 05:12:50 Job executing on host: <127.0.0.1:40133?addrs=127.0.0.1-40133&alias=vm>
\tSlotName: slot1_4@vm
\tCpus = 1
\tDisk = 1024
\tGPUs = 0
\tMemory = 128
...
005 (103.000.000) 2026-11-24 05:12:52 Job terminated.
\t(0) Abnormal termination (signal 9)
\t(0) No core file
\t\tUsr 0 00:00:01, Sys 0 00:00:00  -  Run Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
\t\tUsr 0 00:00:03, Sys 0 00:00:00  -  Total Remote Usage
\t\tUsr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
\t0  -  Run Bytes Sent By Job
\t0  -  Run Bytes Received By Job
\t0  -  Total Bytes Sent By Job
\t0  -  Total Bytes Received By Job
\tPartitionable Resources :    Usage  Request Allocated
\t   Cpus                 :                 1         1
\t   Disk (KB)            :       10     1024      1024
\t   Memory (MB)          :       90      128       128
...
000 (104.000.000) 2026-11-24 05:13:00 Job submitted from host: <127.0.0.1:44131?addrs=127.0.0.1-44131&alias=vm>
    [ DAGNodeName = "idle"; JobBatchName = "b" ]
...
012 (104.000.000) 2026-11-24 05:13:01 Job was held.
\tinput file missing
\tCode 13 Subcode 2
...
"""


def _plan(tmp_path: Path) -> Plan:
    steps = {
        name: StepInfo(
            name=name,
            kind="command",
            axes=(),
            resources=Resources(cpus=1, memory_mb=128),
            retries=0,
            retry_unless_exit=(),
            timeout_s=None,
            priority=0,
            metrics=None,
        )
        for name in ("hog", "flaky", "idle")
    }
    nodes = {name: Node(name, name, ["true"], {}, {}) for name in steps}
    return Plan(pipeline="t", run_id="r", source="p.yaml", steps=steps, nodes=nodes, workdir=str(tmp_path))


def test_each_segment_of_each_job_is_one_record(tmp_path: Path) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(LOG)
    assert record_condor_usage(tmp_path, _plan(tmp_path), log) == 4
    records = read_usage(tmp_path)
    assert [(r.node, r.attempt, r.key, r.reason) for r in records] == [
        ("hog", 1, "101.held1", "oom"),
        ("hog", 2, "102", None),
        ("flaky", 1, "103.evicted1", "evicted"),
        ("flaky", 2, "103", "killed"),
    ]
    held, ran, evicted, killed = records
    assert held.peak_memory_mb == 2314 and held.allocated["memory_mb"] == 2048 and held.exit_code is None
    assert held.host == "vm" and held.slot == "slot1_5@vm" and held.wall_s == 5
    assert "2314 MB" in str(held.extra["hold_reason"])
    assert ran.requested == {"cpus": 2, "memory_mb": 4096, "disk_mb": 2, "gpus": 1}
    assert ran.allocated == {"cpus": 2, "memory_mb": 4096, "disk_mb": 2, "gpus": 1}
    assert ran.peak_memory_mb == 3000 and ran.cpu_s == 8 and ran.wall_s == 10 and ran.exit_code == 0
    assert ran.extra["disk_used_mb"] == 5 and ran.slot == "slot1_2@vm"
    assert evicted.cpu_s == 2 and evicted.exit_code is None
    assert killed.exit_code == -9 and killed.peak_memory_mb == 90 and killed.slot == "slot1_4@vm"


def test_reading_again_or_concurrently_adds_nothing(tmp_path: Path) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(LOG)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(_plan(tmp_path).to_json())
    script = (
        "import sys; from pathlib import Path; from dagflow.plan import Plan;"
        "from dagflow.engines.condor.usage_records import record_condor_usage;"
        "d = Path(sys.argv[1]); print(record_condor_usage(d, Plan.from_json((d / 'plan.json').read_text()),"
        " d / 'dagflow.jobs.log'))"
    )
    readers = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True)
               for _ in range(4)]  # fmt: skip
    appended = [int(reader.communicate(timeout=120)[0]) for reader in readers]
    assert sorted(appended) == [0, 0, 0, 4]
    assert record_condor_usage(tmp_path, _plan(tmp_path), log) == 0
    assert len((tmp_path / "usage.jsonl").read_text().splitlines()) == 4


def test_the_cheap_scan_names_every_segment_ending_event() -> None:
    assert segment_keys(LOG.encode()) == {"101.held1", "102", "103.evicted1", "103", "104.held1"}


def test_no_log_yet_is_no_records(tmp_path: Path) -> None:
    assert record_condor_usage(tmp_path, _plan(tmp_path), tmp_path / "missing.log") == 0
    assert read_usage(tmp_path) == []


# --- the real pool ----------------------------------------------------------------------------------

# The CPU time burnt before the memory is touched: without cgroups (this pool's starter can use none),
# HTCondor's RunRemoteUsage is the job's CPU time at the starter's last sample before it exited, each of
# user and system time in whole seconds. Released once the schedd has a sample showing the 200 MB, the job
# ends before the next sample, so that sample must come after the burn: burnt after the memory, a sample
# taken mid-burn under load read `Usr 0 00:00:00, Sys 0 00:00:00` (cpu_s 0). 3 s, as user plus system
# seconds each rounded down, is at least 2 (this VM counts most of a busy loop as system time).
HOLD = """
import os, sys, time
while time.process_time() < 3:
    pass
block = bytearray(int(sys.argv[1]) * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
# Held until the test has seen the schedd report this size (the starter updates every 5 s on the test pool,
# later on a loaded machine): a fixed sleep made the measured peak depend on the load.
for _ in range(3000):
    if os.path.exists(sys.argv[2]):
        break
    time.sleep(0.2)
"""

PIPELINE = """name: measured
steps:
  big:
    command: [python, hold.py, "200", release]
    resources: {cpus: 1, memory: 512MB}
  flaky:
    command: [sh, -c, "exit 3"]
    retries: 1
"""


@pytest.mark.condor_pool
def test_a_node_s_usage_comes_from_its_terminated_event(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("usage")
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    (workdir / "hold.py").write_text(HOLD)
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]

    def resident_kb() -> int:
        """The big node's ResidentSetSize as the schedd has it from the starter's updates (KiB), 0 if none."""
        queue = condor_pool.run(["condor_q", "-af", "DAGNodeName", "Iwd", "ResidentSetSize"], check=False).stdout
        sizes = [line.split()[2] for line in queue.splitlines() if line.split()[:2] == ["big", str(workdir)]]
        return max((int(size) for size in sizes if size.isdigit()), default=0)

    condor_pool.wait_until(lambda: resident_kb() >= 190 * 1024, "the schedd to see the big node's 200 MB")
    (workdir / "release").write_text("")

    def status() -> dict:
        return json.loads(condor_pool.dagflow(["status", run_id, "--json"], cwd=workdir, check=False).stdout)

    ended = condor_pool.wait_until(
        lambda: (s := status())["state"] not in ("running", "not-started") and s, f"run {run_id} to end"
    )
    nodes = {node["node"]: node for node in ended["nodes"]}  # type: ignore[index]
    big = nodes["big"]["usage"]
    assert big is not None and big["engine"] == "condor" and big["exit_code"] == 0
    assert 190 <= big["peak_memory_mb"] <= 400, big
    assert big["requested"]["memory_mb"] == 512 and big["requested"]["cpus"] == 1
    assert big["allocated"]["memory_mb"] >= 512 and big["allocated"]["cpus"] >= 1
    assert big["cpu_s"] >= 1 and big["wall_s"] >= 2 and big["host"] and "@" in big["slot"]
    assert nodes["flaky"]["usage"]["attempt"] == 2 and nodes["flaky"]["usage"]["exit_code"] == 3
    run_dir = Path(ended["run_dir"])  # type: ignore[index]
    for _ in range(3):  # status again: nothing more is recorded
        status()
    records = read_usage(run_dir)
    lines = (run_dir / "usage.jsonl").read_text().splitlines()
    assert len(lines) == len(records) == 3
    assert sorted((r.node, r.attempt) for r in records) == [("big", 1), ("flaky", 1), ("flaky", 2)]
    assert all(r.key == r.extra["cluster"] for r in records)


def test_a_log_read_as_it_grows_numbers_a_node_s_segments_on(tmp_path: Path) -> None:
    """Status reads the log while jobs run: only the new jobs' events are parsed each time, and a node's
    later segments are numbered after its recorded ones."""
    log = tmp_path / "dagflow.jobs.log"
    cut = LOG.index("000 (102.")
    middle = LOG.index("001 (103.000.000) 2026-11-24 05:12:50")
    log.write_text(LOG[:cut] + LOG[cut : cut + 40])  # and a torn event being written
    assert record_condor_usage(tmp_path, _plan(tmp_path), log) == 1
    log.write_text(LOG[:middle])
    assert record_condor_usage(tmp_path, _plan(tmp_path), log) == 2
    log.write_text(LOG)
    assert record_condor_usage(tmp_path, _plan(tmp_path), log) == 1
    assert [(r.node, r.attempt, r.key) for r in read_usage(tmp_path)] == [
        ("hog", 1, "101.held1"),
        ("hog", 2, "102"),
        ("flaky", 1, "103.evicted1"),
        ("flaky", 2, "103"),
    ]
