"""The Slurm engine without a cluster: how a plan is cut into job arrays and single jobs, the sbatch
options, and the node wrapper (run with bash directly, as Slurm would run it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from dagflow.engines.batch.records import BatchRecords
from dagflow.engines.batch.units import SINGLE, plan_units
from dagflow.engines.registry import spec_checks
from dagflow.engines.slurm import commands
from dagflow.engines.slurm.submit import array_spec, comment, render_script, sbatch_options, time_limit_minutes
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.journal import read_journal
from dagflow.spec import load_spec

CHAIN = """name: chain
matrix:
  region: [us, br, de]
steps:
  a: {command: "true"}
  b: {command: "true", needs: [a], classads: {DagflowTeam: recs}}
  gpu: {command: "true", needs: [a], over: [region], resources: {gpus: 2, cpus: 3, memory: 2GB}}
  report: {command: "true", needs: [b], over: [region], timeout: 90s, retries: 1}
"""

MIXED = """name: mixed
matrix:
  region: [us, br]
  trial: ["1", "2", "3"]
steps:
  prep: {command: "true", over: [trial]}
  fit: {command: "true", needs: [prep]}
"""


def plan_of(tmp_path: Path, text: str) -> Plan:
    (tmp_path / "pipeline.yaml").write_text(text)
    return expand(load_spec(tmp_path / "pipeline.yaml", spec_checks()), run_id="r1")


def test_a_chain_becomes_arrays_wired_task_to_task_and_a_gather_waits_for_the_whole_array(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CHAIN)
    units = plan_units(plan, plan.nodes, max_array=1001)
    by_name = {unit.name: (index, unit) for index, unit in enumerate(units)}
    assert [unit.name for unit in units] == ["a", "b", "gpu", "report"]
    a_index, a = by_name["a"]
    assert a.is_array and a.tasks == {0: "a.us", 1: "a.br", 2: "a.de"}
    assert by_name["b"][1].unit_deps == [("aftercorr", a_index)]
    gpu = by_name["gpu"][1]
    assert not gpu.is_array and gpu.tasks == {SINGLE: "gpu"} and gpu.unit_deps == [("afterok", a_index)]
    assert by_name["report"][1].unit_deps == [("afterok", by_name["b"][0])]


def test_wiring_an_array_cannot_express_falls_back_to_one_job_per_node(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, MIXED)
    units = plan_units(plan, plan.nodes, max_array=1001)
    prep = units[0]
    assert prep.is_array and sorted(prep.tasks.values()) == ["prep.br", "prep.us"]
    fits = units[1:]
    assert all(not unit.is_array for unit in fits) and len(fits) == 6
    assert {unit.name: unit.node_deps for unit in fits}["fit.br.2"] == ["prep.br"]


def test_a_resume_submits_only_the_unfinished_and_waits_only_for_them(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CHAIN)
    todo = ["a.br", "b.br", "b.de", "report"]  # a.us, a.de, b.us, gpu succeeded before
    units = plan_units(plan, todo, max_array=1001)
    names = {unit.name: unit for unit in units}
    assert names["a.br"].tasks == {SINGLE: "a.br"} and not names["a.br"].node_deps
    # b.br needs a.br again, b.de needs nothing resubmitted: one clause cannot say that.
    assert names["b.br"].node_deps == ["a.br"] and names["b.de"].node_deps == []
    assert sorted(names["report"].node_deps) == ["b.br", "b.de"]


def test_steps_wider_than_max_array_size_are_chunked_and_chunks_still_correspond(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CHAIN)
    units = plan_units(plan, plan.nodes, max_array=2)
    assert [(unit.name, unit.tasks) for unit in units[:2]] == [("a", {0: "a.us", 1: "a.br"}), ("a.chunk1", {0: "a.de"})]
    b0, b1 = units[2], units[3]
    assert b0.unit_deps == [("aftercorr", 0)] and b1.unit_deps == [("aftercorr", 1)]
    assert sorted(units[-1].unit_deps) == [("afterok", 2), ("afterok", 3)]  # report: after both chunks of b


def test_sbatch_options_carry_resources_limits_and_the_dagflow_attributes(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, CHAIN)
    units = {unit.name: unit for unit in plan_units(plan, plan.nodes, max_array=1001)}
    records = BatchRecords(tmp_path, "slurm")
    gpu = sbatch_options(plan, units["gpu"], records)
    assert {"--gres=gpu:2", "--cpus-per-task=3", "--mem=2048M", "--kill-on-invalid-dep=yes"} <= set(gpu)
    assert "--job-name=gpu:r1" in gpu
    b = sbatch_options(plan, units["b"], records)
    assert "--array=0-2" in b and not any(option.startswith("--time") for option in b)
    attrs = json.loads(comment(plan, units["b"]))
    assert attrs == {
        "DagflowPipeline": "chain",
        "DagflowRunId": "r1",
        "DagflowStep": "b",
        "DagflowKind": "command",
        "DagflowTeam": "recs",
    }
    # two attempts of 90 s, each with its kill grace, plus a minute: the wrapper times out first
    assert time_limit_minutes(plan.steps["report"]) == 5
    assert array_spec([0, 1, 2, 3, 7, 9, 10]) == "0-3,7,9-10"


def test_squeue_task_ranges() -> None:
    assert list(commands._task_ids("0-3,7,9-11%4")) == [0, 1, 2, 3, 7, 9, 10, 11]


def test_a_missing_slurm_is_one_line_naming_what_was_tried(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "nowhere.conf"))
    with pytest.raises(commands.SlurmUnreachableError, match=r"no Slurm reachable: SLURM_CONF=.*nowhere.conf"):
        commands.max_array_size()
    monkeypatch.delenv("SLURM_CONF")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(commands.SlurmUnreachableError, match="`scontrol` is not on PATH") as caught:
        commands.max_array_size()
    assert caught.value.exit_code == 3


# --- the node wrapper, run by bash as a batch job would run it ---------------------------------------

WRAPPED = """name: wrapped
steps:
  flaky:
    command: [sh, -c, "n=$(cat count 2>/dev/null || echo 0); echo $((n+1)) > count; echo try $n; test $n -ge 2"]
    retries: 3
  usage: {command: [sh, -c, "exit 2"], retries: {count: 3, unless_exit: [2]}}
  slow: {command: [sleep, "5"], timeout: 1s}
  env: {command: [sh, -c, "echo $DAGFLOW_RUN_ID $DAGFLOW_NODE $GREETING"], env: {GREETING: "hi there"}}
"""


def run_wrapped(tmp_path: Path, plan: Plan, name: str) -> int:
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    records = BatchRecords(run_dir, "slurm")
    records.create()
    script = records.scripts_dir / f"{name}.sh"
    script.write_text(render_script(plan, plan.steps[plan.nodes[name].step], {SINGLE: name}, run_dir, []))
    env = {key: value for key, value in os.environ.items() if not key.startswith("SLURM")}
    return subprocess.run(["bash", str(script)], env=env, check=False, timeout=30).returncode


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("timeout") is None, reason="needs coreutils timeout")
def test_the_wrapper_journals_attempts_retries_unless_exit_and_timeouts(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, WRAPPED)
    assert run_wrapped(tmp_path, plan, "flaky") == 0
    assert run_wrapped(tmp_path, plan, "usage") == 2  # the node's own exit code (unless_exit: no retry)
    assert run_wrapped(tmp_path, plan, "slow") == 143  # timed out: 128 + SIGTERM
    assert run_wrapped(tmp_path, plan, "env") == 0
    journal = read_journal(tmp_path / "run" / "journal.jsonl")
    flaky, usage, slow = journal.nodes["flaky"], journal.nodes["usage"], journal.nodes["slow"]
    assert (flaky.state, flaky.attempts, flaky.rc) == ("succeeded", 3, 0)
    assert (usage.state, usage.attempts, usage.rc, usage.why) == ("failed", 1, 2, "exit code 2")
    assert (slow.state, slow.attempts, slow.why) == ("failed", 1, "timed out after 1s")
    logs = tmp_path / "run" / "logs"
    assert (logs / "flaky.out").read_text().split("\n")[:3] == ["try 0", "try 1", "try 2"]
    assert "=== dagflow: attempt 3 ===" in (logs / "flaky.err").read_text()
    assert (logs / "env.out").read_text() == "r1 env hi there\n"
