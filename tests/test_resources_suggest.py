"""Requests learned from history: `dagflow resources suggest` and `auto` resources at plan time.

History is real run directories holding usage records written through dagflow.run.usage.record_usage
(the interface every engine records through), plus a real local run for the end-to-end case.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.resources.auto import AutoResources
from dagflow.run.resources.history import pipeline_history
from dagflow.run.resources.suggest import percentile, round_duration_s, round_memory_mb, suggest
from dagflow.run.usage import NodeUsage, record_usage
from dagflow.spec import load_spec

PIPELINE = """\
name: learn
steps:
  prep:
    command: [python, -c, "print('prep')"]
  train:
    needs: [prep]
    command: [python, -c, "print('train')"]
    resources: {memory: MEMORY, cpus: CPUS, memory_max: 64GB}
    timeout: TIMEOUT
"""


def _pipeline(tmp_path: Path, memory: str = "auto", cpus: str = "auto", timeout: str = "auto") -> Path:
    path = tmp_path / "pipeline.yaml"
    text = PIPELINE.replace("MEMORY", memory).replace("CPUS", cpus).replace("TIMEOUT", timeout)
    path.write_text(text, encoding="utf-8")
    return path


def _record(run_dir: Path, step: str, attempt: int = 1, *, peak: float | None = 1000.0, wall: float = 100.0,
            cpu: float | None = 190.0, reason: str | None = None, memory_mb: float = 1024.0, node: str | None = None,
            gpus: float = 0, gpu_peak: float | None = None, gpu_util: float | None = None) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    requested = {"cpus": 1.0, "memory_mb": memory_mb, "gpus": gpus}
    record_usage(run_dir, NodeUsage(
        node=node or step, step=step, attempt=attempt, engine="local", started=1.0, ended=1.0 + wall, wall_s=wall,
        cpu_s=cpu, peak_memory_mb=peak, gpu_memory_peak_mb=gpu_peak, gpu_utilization_pct=gpu_util, host="box",
        slot=None, requested=requested, allocated={}, exit_code=0 if reason is None else -9, reason=reason,
    ))  # fmt: skip


def _history(tmp_path: Path, runs: int = 3) -> Path:
    runs_dir = tmp_path / ".dagflow" / "runs"
    for index in range(runs):
        run_dir = runs_dir / f"learn-20261124-05000{index}-beef"
        for node in range(10):  # peaks 1000..1900 MB; walls 100..190 s; ~1.9 cores busy
            _record(run_dir, "train", node=f"train.{node}", peak=1000.0 + 100 * node, wall=100.0 + 10 * node,
                    cpu=(100.0 + 10 * node) * 1.9)
        _record(run_dir, "prep", peak=50.0, wall=2.0, cpu=1.0)
    return runs_dir


def test_percentile_and_rounding() -> None:
    assert percentile(list(range(1, 101))) == 95
    assert percentile([3.0]) == 3.0
    assert percentile([1.0, 2.0]) == 2.0  # nearest rank: at least 95% of the samples are at or below
    assert round_memory_mb(100) == 128
    assert round_memory_mb(2049) == 2560
    assert round_memory_mb(20000) == 20480
    assert round_duration_s(61) == 120
    assert round_duration_s(3601) == 3900
    assert round_duration_s(7 * 3600 + 1) == 8 * 3600


def test_suggestions_are_a_high_percentile_plus_a_margin(tmp_path: Path) -> None:
    runs_dir = _history(tmp_path)
    history = pipeline_history("learn", [runs_dir])
    assert len(history) == 3
    train = suggest(history)["train"]
    memory = train["memory"]
    assert memory.evidence.runs == 3 and memory.evidence.samples == 30
    assert memory.evidence.percentile == 1900.0 and memory.evidence.max == 1900.0
    assert memory.value == round_memory_mb(1900 * 1.2) == 2560
    assert train["cpus"].value == 2  # 1.9 cores busy
    assert train["timeout"].value == round_duration_s(190 * 1.5) == 300
    assert "gpus" not in train  # no attempt asked for a GPU


def test_never_below_what_failed_for_lack_of_it(tmp_path: Path) -> None:
    runs_dir = _history(tmp_path, runs=1)
    run_dir = runs_dir / "learn-20261124-050009-beef"
    _record(run_dir, "train", peak=2900.0, memory_mb=3000.0, reason="oom", node="train.big")
    _record(run_dir, "train", attempt=2, peak=None, wall=1000.0, reason="timeout", node="train.slow")
    train = suggest(pipeline_history("learn", [runs_dir]), {"train": 1.5})["train"]
    memory = train["memory"]
    assert memory.evidence.failures == 1 and memory.evidence.floor == 3000.0 * 1.5
    assert memory.value >= 4500 and memory.value == round_memory_mb(4500)
    assert "ran out of memory" in memory.why
    assert train["timeout"].value == round_duration_s(2000) and train["timeout"].evidence.failures == 1
    assert memory.evidence.samples == 10  # failed attempts are not samples


def test_gpu_fields_and_an_unused_gpu(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "learn-20261124-050000-beef"
    for node, peak in enumerate((9000.0, 10000.0, 12000.0)):
        _record(run_dir, "train", node=f"train.{node}", gpus=1, gpu_peak=peak, gpu_util=80.0)
        _record(run_dir, "idle", node=f"idle.{node}", gpus=2, gpu_peak=0.0, gpu_util=0.0)
    learned = suggest(pipeline_history("learn", [tmp_path / "runs"]))
    assert learned["train"]["gpu_memory"].value == round_memory_mb(12000 * 1.1)
    assert learned["train"]["gpus"].value == 1
    assert learned["idle"]["gpus"].value == 0 and "no attempt used" in learned["idle"]["gpus"].why


def test_runs_of_other_pipelines_are_not_history(tmp_path: Path) -> None:
    runs_dir = tmp_path / "runs"
    _record(runs_dir / "learnx-20261124-050000-beef", "train", peak=99999.0)  # another pipeline's default id
    custom = runs_dir / "my-own-id"
    _record(custom, "train", peak=500.0)
    (custom / "plan.json").write_text(json.dumps({"pipeline": "learn"}))
    other = runs_dir / "not-this-one"
    _record(other, "train", peak=77777.0)
    (other / "plan.json").write_text(json.dumps({"pipeline": "different"}))
    history = pipeline_history("learn", [runs_dir])
    assert [run.run_id for run in history] == ["my-own-id"]


def test_suggest_command_table_json_and_no_history(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path, memory="1GB", cpus="1", timeout="1h")
    empty = dagflow_cli("resources", "suggest", str(pipeline), cwd=tmp_path)
    assert empty.returncode == 1
    assert "no usage recorded for pipeline 'learn'" in empty.stderr and "Traceback" not in empty.stderr
    _history(tmp_path)
    table = dagflow_cli("resources", "suggest", str(pipeline), cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "learned from 3 past runs" in table.stdout
    row = next(line for line in table.stdout.splitlines() if "memory" in line and "train" in line)
    assert "2560MB" in row and "1900 MB" in row and "30" in row
    done = dagflow_cli("resources", "suggest", str(pipeline), "--json", cwd=tmp_path)
    result = json.loads(done.stdout)
    assert result["runs"] == 3 and result["percentile"] == 95.0
    memory = result["steps"]["train"]["memory"]
    assert memory["suggested"] == 2560 and memory["current"] == 1024 and memory["evidence"]["samples"] == 30
    assert result["steps"]["prep"]["memory"]["suggested"] == 128


def test_bad_pipeline_is_a_located_error(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path, memory="lots")
    done = dagflow_cli("resources", "suggest", str(pipeline), cwd=tmp_path)
    assert done.returncode == 2
    assert "pipeline.yaml:8:25: steps.train.resources.memory: 'lots' is not a size" in done.stderr
    assert "Traceback" not in done.stderr


def _expand_auto(path: Path) -> Plan:
    """The plan as the commands make it: `auto` resources resolved from the pipeline's past runs."""
    spec = load_spec(path)
    return expand(spec, resolve=AutoResources(spec).resolve)


def test_without_a_resolver_auto_keeps_the_defaults(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _history(tmp_path)
    train = expand(load_spec(_pipeline(tmp_path))).steps["train"]  # the plan layer reads no history itself
    assert train.resources.memory_mb == 1024 and train.resources.cpus == 1 and train.timeout_s is None
    assert train.resource_notes == {}


def test_auto_uses_the_suggestion_and_records_why_in_the_plan(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    _history(tmp_path)
    plan = _expand_auto(_pipeline(tmp_path))
    train = plan.steps["train"]
    assert train.resources.memory_mb == 2560 and train.resources.cpus == 2 and train.timeout_s == 300
    assert train.resources.memory_max_mb == 64 * 1024
    assert train.resource_notes["memory"].startswith("auto: 2560MB from 30 sample(s) in 3 run(s)")
    assert "p95 1900 MB" in train.resource_notes["memory"]
    assert plan.steps["prep"].resource_notes == {}
    assert "warning" not in capsys.readouterr().err
    shown = dagflow_cli("plan", str(tmp_path / "pipeline.yaml"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "train.memory: auto: 2560MB" in shown.stdout
    as_json = json.loads(dagflow_cli("plan", str(tmp_path / "pipeline.yaml"), "--json", cwd=tmp_path).stdout)
    assert as_json["steps"]["train"]["resources"]["memory_mb"] == 2560
    assert as_json["steps"]["train"]["resource_notes"]["cpus"].startswith("auto: 2 from 30 sample(s)")


def test_auto_without_history_falls_back_to_the_default_with_a_warning(tmp_path: Path) -> None:
    pipeline = _pipeline(tmp_path)
    done = dagflow_cli("plan", str(pipeline), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    train = plan["steps"]["train"]
    assert train["resources"]["memory_mb"] == 1024 and train["resources"]["cpus"] == 1 and train["timeout_s"] is None
    assert "no usage recorded" in train["resource_notes"]["memory"]
    assert "pipeline.yaml:8:25: steps.train.resources.memory: auto: no usage recorded" in done.stderr
    assert "steps.train.timeout: auto" in done.stderr


def test_auto_is_capped_by_memory_max(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _history(tmp_path)
    path = _pipeline(tmp_path)
    path.write_text(path.read_text().replace("memory_max: 64GB", "memory_max: 2GB"))
    train = _expand_auto(path).steps["train"]
    assert train.resources.memory_mb == 2048 and "capped at memory_max 2048 MB" in train.resource_notes["memory"]


def test_schema_accepts_auto(tmp_path: Path) -> None:
    import jsonschema
    import yaml

    done = dagflow_cli("schema", cwd=tmp_path)
    schema = json.loads(done.stdout)
    document = yaml.safe_load(PIPELINE.replace("MEMORY", "auto").replace("CPUS", "auto").replace("TIMEOUT", "auto"))
    jsonschema.validate(document, schema)
    memory = next(item for item in schema["$defs"]["ResourcesSpec"]["properties"]["memory"]["anyOf"]
                  if item.get("const"))
    assert memory["const"] == "auto"
    document["steps"]["train"]["resources"]["cpus"] = "autox"  # sizes are any string to the schema; cpus not
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("the schema accepted cpus: autox")


def dagflow_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env={**cli_env(), "COLUMNS": "250"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
def test_learned_from_real_local_runs(tmp_path: Path) -> None:
    """Two real local runs record what their node used; suggest and `auto` read those records."""
    pipeline = tmp_path / "pipeline.yaml"
    hog = "import time; b = b'x' * (150 * 1024 * 1024); time.sleep(0.5)"
    pipeline.write_text(
        f'name: real\nsteps:\n  work:\n    command: [python, -c, "{hog}"]\n    resources: {{memory: 2GB}}\n'
    )
    for _ in range(2):
        done = dagflow_cli("run", str(pipeline), "--no-cache", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    result = json.loads(dagflow_cli("resources", "suggest", str(pipeline), "--json", cwd=tmp_path).stdout)
    memory = result["steps"]["work"]["memory"]
    assert result["runs"] == 2 and memory["evidence"]["samples"] == 2 and memory["evidence"]["runs"] == 2
    assert 150 <= memory["evidence"]["percentile"] < 1024  # the peak RSS the local engine measured
    assert memory["suggested"] == round_memory_mb(memory["evidence"]["percentile"] * 1.2)
    assert memory["current"] == 2048
    pipeline.write_text(pipeline.read_text().replace("memory: 2GB", "memory: auto"))
    plan = json.loads(dagflow_cli("plan", str(pipeline), "--json", cwd=tmp_path).stdout)
    assert plan["steps"]["work"]["resources"]["memory_mb"] == memory["suggested"]
