"""Memory growth: a node over its memory runs again with more, up to memory_max.

Locally (dagflow/engines/local/memory_limit.py) with real processes that allocate real memory; on
HTCondor (dagflow/engines/condor/memory_policy.py) the generated policy is parsed by HTCondor's own
submit parser, and on the real pool a job that uses more than its slot is held, released with a bigger
request and finishes, or, at the cap, is removed and its node fails.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import htcondor2
import pytest
from local_run import run_local
from test_local_support import make_plan, node, step

from dagflow.engines.condor.memory_policy import MEMORY_HOLD_SUBCODE, memory_growth_lines, with_memory_growth
from dagflow.engines.local import RunOptions
from dagflow.engines.local.memory_limit import group_rss_mb
from dagflow.plan import Resources
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.usage import read_usage
from tests.condor_pool import Pool

# Allocates MB megabytes (touching every page), then sleeps: resident until it exits.
HOG = "import sys, time; b = b'x' * (int(sys.argv[1]) * 1024 * 1024); time.sleep(float(sys.argv[2]))"


def _hog_plan(tmp_path: Path, megabytes: int, resources: Resources, retries: int = 0):  # -> Plan
    hog = step("hog", resources=resources, retries=retries)
    hog_node = node("hog", "hog", "")
    hog_node.argv = ["python", "-c", HOG, str(megabytes), "1.5"]
    return make_plan(tmp_path, [hog], [hog_node])


def _ends(tmp_path: Path, run_id: str = "r1") -> list[dict]:
    path = RunLayout(tmp_path / "runs", run_id).journal_path
    return [json.loads(line) for line in path.read_text().splitlines() if '"e":"end"' in line]


def _options(tmp_path: Path) -> RunOptions:
    return RunOptions(runs_dir=tmp_path / "runs", jobs=1)


def test_group_rss_counts_the_whole_process_group() -> None:
    import os
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", HOG, "64", "30"], process_group=0)
    try:
        deadline = 60
        import time

        start = time.monotonic()
        while group_rss_mb(child.pid) < 64 and time.monotonic() - start < deadline:
            time.sleep(0.05)
        assert group_rss_mb(child.pid) >= 64
        assert group_rss_mb(os.getpid() + 10_000_000) == 0.0  # no such group
    finally:
        child.kill()
        child.wait()


@pytest.mark.slow
def test_a_local_node_over_its_memory_runs_again_with_more(tmp_path: Path) -> None:
    plan = _hog_plan(tmp_path, 300, Resources(memory_mb=128, memory_max_mb=1024, memory_growth=2.0))
    result = run_local(plan, _options(tmp_path))
    assert result.ok, result.failures
    ends = _ends(tmp_path)
    assert [end["s"] for end in ends] == ["retry", "retry", "succeeded"]  # 128 MB, 256 MB, then 512 MB
    assert "out of memory: over its 128 MB limit" in ends[0]["why"] and "again with 256 MB" in ends[0]["why"]
    assert "over its 256 MB limit" in ends[1]["why"] and "again with 512 MB" in ends[1]["why"]
    assert read_journal(RunLayout(tmp_path / "runs", "r1").journal_path).nodes["hog"].state == "succeeded"
    usage = read_usage(RunLayout(tmp_path / "runs", "r1").run_dir)  # recorded by the local engine
    assert [(u.attempt, u.reason, u.requested["memory_mb"]) for u in usage] == [
        (1, "oom", 128), (2, "oom", 256), (3, None, 512)
    ]
    assert usage[0].peak_memory_mb is not None and usage[0].peak_memory_mb > 128
    # and what suggest learns from it: at least the 256 MB that ran out, x2
    from dagflow.run.resources.history import RunUsage
    from dagflow.run.resources.suggest import suggest

    learned = suggest([RunUsage("r1", tmp_path / "runs" / "r1", usage)])["hog"]["memory"]
    assert learned.evidence.failures == 2 and learned.value is not None and learned.value >= 512


def test_at_memory_max_the_node_fails_and_retries_are_not_spent_on_growth(tmp_path: Path) -> None:
    plan = _hog_plan(tmp_path, 400, Resources(memory_mb=128, memory_max_mb=256, memory_growth=2.0), retries=1)
    result = run_local(plan, _options(tmp_path))
    assert not result.ok
    ends = _ends(tmp_path)
    # 128 MB: grown to 256 (not a retry); 256 MB: at the cap, fails at once
    assert [end["s"] for end in ends] == ["retry", "failed"]
    assert "over its 256 MB limit" in ends[-1]["why"] and "at its memory_max" in ends[-1]["why"]
    assert ends[-1]["rc"] == -9 or ends[-1]["rc"][0] == -9  # SIGKILL (the record may carry rusage after it)


def test_without_memory_max_the_local_engine_does_not_limit_memory(tmp_path: Path) -> None:
    plan = _hog_plan(tmp_path, 200, Resources(memory_mb=64))
    assert run_local(plan, _options(tmp_path)).ok


def _step_with(resources: Resources, timeout_s: int | None = None):  # -> StepInfo
    return step("train", resources=resources, timeout_s=timeout_s)


def test_condor_policy_lines_parse_and_merge_with_the_timeout_removal() -> None:
    res = Resources(memory_mb=512, memory_max_mb=4096, memory_growth=1.5)
    assert memory_growth_lines(step("plain")) == []
    lines = with_memory_growth(_step_with(res), ["allowed_execute_duration = 60", "periodic_remove = (TIMEOUT)"])
    removes = [line for line in lines if line.startswith("periodic_remove")]
    assert len(removes) == 1 and removes[0].startswith("periodic_remove = ((TIMEOUT)) || (")
    text = "\n".join(["executable = /bin/true", "request_memory = 512M", *lines])
    submit = htcondor2.Submit(text)
    assert "MemoryUsage * 1.5" in submit["request_memory"] and "4096" in submit["request_memory"]  # the last one wins
    assert submit["periodic_hold_subcode"] == str(MEMORY_HOLD_SUBCODE)
    assert "MemoryProvisioned" in submit["periodic_hold"]
    import classad2

    for command in ("request_memory", "periodic_hold", "periodic_release", "periodic_remove", "periodic_hold_reason"):
        classad2.ExprTree(submit[command])  # each is a ClassAd expression HTCondor can parse
    grown = classad2.ClassAd({"MemoryUsage": 1000})
    grown["RequestMemory"] = classad2.ExprTree(submit["request_memory"])
    assert grown.eval("RequestMemory") == 1500
    assert classad2.ClassAd({"MemoryUsage": 5000, "X": classad2.ExprTree(submit["request_memory"])}).eval("X") == 4096
    fresh = classad2.ClassAd({"X": classad2.ExprTree(submit["request_memory"])})
    assert fresh.eval("X") == 512


# --- the real pool --------------------------------------------------------------------------------

# On the pool, a slot can be bigger than the request (the schedd reuses a claimed slot that fits), so
# the hog uses more than the slot it got: the slot's Memory (from the job's .machine.ad) + 256 MB on its
# first start, remembered in a file outside the sandbox so later starts use the same amount.
POOL_HOG = """\
import os, re, sys, time
state = sys.argv[1]
ad = open(os.environ["_CONDOR_MACHINE_AD"]).read()
slot = int(re.search(r"^Memory = (\\d+)$", ad, re.M).group(1))
if os.path.exists(state):
    need = int(open(state).read())
else:
    need = slot + 256
    open(state, "w").write(str(need))
if need > 6144:
    sys.exit(f"the pool gave a {slot} MB slot: too big to overrun on this machine")
with open(state + ".starts", "a") as log:
    log.write(f"{slot} {need}\\n")
b = b"x" * (need * 1024 * 1024)
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 40)
print("done", len(b))
"""


def _pool_pipeline(pool: Pool, name: str, memory: str, memory_max: str) -> Path:
    workdir = pool.workdir(name)
    (workdir / "hog.py").write_text(POOL_HOG)
    (workdir / "pipeline.yaml").write_text(
        f"name: {name}\ncondor: {{data_mode: shared}}\nsteps:\n  hog:\n"
        f"    command: [python, hog.py, {workdir / 'hog.state'}]\n"
        f"    inputs: [hog.py]\n"
        f"    resources: {{memory: {memory}, memory_max: {memory_max}}}\n"
    )
    pool.give(workdir)
    return workdir


def _run_to_end(pool: Pool, workdir: Path) -> dict:
    done = pool.dagflow(["submit", "pipeline.yaml", "--json"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]

    def ended() -> dict | None:
        status = json.loads(pool.dagflow(["status", run_id, "--json"], cwd=workdir, check=False).stdout)
        return status if status["state"] not in ("running", "not-started") else None

    status = pool.wait_until(ended, f"run {run_id} to end", timeout=900)
    return status  # type: ignore[return-value]


def _job_history(pool: Pool, workdir: Path) -> list[dict[str, str]]:
    done = pool.run(["condor_history", "-constraint", f'Iwd == "{workdir}" || DagflowStep == "hog"', "-limit", "5",
                     "-af:j", "Iwd", "NumHolds", "RequestMemory", "MemoryProvisioned", "LastHoldReason",
                     "HoldReasonSubCode", "JobStatus"])
    return [{"line": line} for line in done.stdout.splitlines()]


@pytest.mark.condor_pool
def test_pool_job_over_its_memory_is_held_released_with_more_and_finishes(condor_pool: Pool) -> None:
    workdir = _pool_pipeline(condor_pool, "memgrow", "256MB", "8GB")
    status = _run_to_end(condor_pool, workdir)
    assert status["state"] == "succeeded", status
    starts = [line.split() for line in (workdir / "hog.state.starts").read_text().splitlines()]
    assert len(starts) >= 2, starts  # held once at least, then started again
    first_slot, need = int(starts[0][0]), int(starts[0][1])
    last_slot = int(starts[-1][0])
    assert last_slot > need > first_slot  # released into a slot big enough for what it uses
    log = (workdir / ".dagflow").rglob("dagflow.jobs.log")
    events = "\n".join(path.read_text() for path in log)
    assert "dagflow: memory usage" in events and f"Code 3 Subcode {MEMORY_HOLD_SUBCODE}" in events


@pytest.mark.condor_pool
def test_pool_job_at_memory_max_is_removed_and_its_node_fails(condor_pool: Pool) -> None:
    workdir = _pool_pipeline(condor_pool, "memcap", "128MB", "128MB")
    status = _run_to_end(condor_pool, workdir)
    assert status["state"] == "failed", status
    hog = next(node for node in status["nodes"] if node["node"] == "hog")
    assert hog["state"] == "failed"
    events = "\n".join(path.read_text() for path in (workdir / ".dagflow").rglob("dagflow.jobs.log"))
    assert re.search(r"dagflow: memory usage \d+ MB over the \d+ MB provisioned \(memory_max 128 MB\)", events)
    assert "Job was aborted" in events or "aborted" in events.lower()
