"""`dagflow run --gpus none` (#43 item 10): a GPU pipeline smoke-tested on a machine without GPUs. Its GPU
steps run on the CPU instead of being refused (`step train needs 1 GPU; this machine has 0 GPUs`): every
node sees CUDA_VISIBLE_DEVICES empty, {gpu.memory_mb} is the step's gpu_memory, one stderr line says which
steps run without their GPUs, and the run's status, JSON and report say it was a CPU smoke test."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu-train"
HAS_GPU = shutil.which("nvidia-smi") is not None

PIPELINE = """\
name: gpus
steps:
  prep:
    command: [sh, -c, 'echo "prep CUDA_VISIBLE_DEVICES=[${{CUDA_VISIBLE_DEVICES-unset}}]" >> seen']
  train:
    needs: [prep]
    command: [sh, -c, 'echo "train CUDA_VISIBLE_DEVICES=[${{CUDA_VISIBLE_DEVICES-unset}}] memory=$1" >> seen', sh,
              "{gpu.memory_mb}"]
    resources: {gpus: 1, gpu_memory: 16GB}
  infer:
    needs: [train]
    env: {MEMORY: "{gpu.memory_mb}"}
    command: [sh, -c, 'echo "infer memory=$MEMORY" >> seen']
    resources: {gpus: 1}
"""


def dagflow(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(), "CUDA_VISIBLE_DEVICES": "0"}  # what a node must not inherit under --gpus none
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)  # fmt: skip


@pytest.mark.skipif(HAS_GPU, reason="a machine with a GPU runs GPU steps on it")
def test_without_the_option_a_gpu_step_is_refused_and_the_error_names_it(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    done = dagflow("run", "pipeline.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "step train needs 1 GPU" in done.stderr and "--gpus none" in done.stderr


def test_gpus_none_runs_gpu_steps_on_the_cpu_and_the_run_says_so(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    done = dagflow("run", "pipeline.yaml", "--gpus", "none", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "seen").read_text().splitlines() == [
        "prep CUDA_VISIBLE_DEVICES=[]",
        "train CUDA_VISIBLE_DEVICES=[] memory=16384",  # the step's gpu_memory
        "infer memory=0",  # no gpu_memory asked
    ]
    said = [line for line in done.stderr.splitlines() if "--gpus none" in line]
    assert said == [
        "dagflow: --gpus none: steps infer, train run on the CPU, without GPUs (CUDA_VISIBLE_DEVICES is empty; "
        "{gpu.memory_mb} is the step's gpu_memory; nothing cached)"
    ], done.stderr

    status = dagflow("status", "latest", cwd=tmp_path)
    assert "a CPU smoke test (--gpus none): steps infer, train run on the CPU, without GPUs" in status.stdout
    as_json = json.loads(dagflow("status", "latest", "--json", cwd=tmp_path).stdout)
    assert as_json["local"]["gpus"] == "none"
    report = dagflow("report", "latest", "-o", "report.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "a CPU smoke test (--gpus none)" in (tmp_path / "report.html").read_text()

    # A smoke test's results stand in for no later run: run again, every node runs again.
    again = dagflow("run", "pipeline.yaml", "--gpus", "none", cwd=tmp_path)
    assert again.returncode == 0 and "3 succeeded" in again.stdout + again.stderr, again.stdout + again.stderr
    assert len((tmp_path / "seen").read_text().splitlines()) == 6


@pytest.mark.slow
def test_the_gpu_example_runs_on_this_cpu_only_machine(tmp_path: Path) -> None:
    workdir = tmp_path / "gpu-train"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("checkpoints", "models", "data", ".dagflow"))
    done = dagflow("run", "pipeline.yaml", "--gpus", "none", "--set", "epochs=1", cwd=workdir, timeout=900)
    assert "needs 1 GPU" not in done.stderr and "step train runs on the CPU, without GPUs" in done.stderr
    if importlib.util.find_spec("torch") is None:  # CI has no torch: the train step says how to get it
        assert done.returncode == 1, done.stdout + done.stderr
        log = next((workdir / ".dagflow" / "runs").glob("*/logs/train.us.err")).read_text()
        assert "train.py needs PyTorch" in log
        return
    assert done.returncode == 0, done.stdout + done.stderr
    for region in ("us", "br"):
        metrics = json.loads((workdir / "models" / region / "metrics.json").read_text())
        assert metrics["device"] == "cpu" and metrics["batch_size"] == 8192 // 8, metrics  # gpu_memory: 8GB
        assert (workdir / "promoted" / region / "latest").exists()
    assert os.listdir(workdir / "published")
