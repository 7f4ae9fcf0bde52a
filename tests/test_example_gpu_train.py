"""examples/gpu-train (issue #28 item 7): it validates and compiles for a stock HTCondor pool (GPU
placement from HTCondor's own GPU discovery attributes, not an agent's), and its train step is real
PyTorch: without torch it says how to install it (exit 2); with torch it trains one epoch per run,
checkpoints and exits 85 until the last epoch (run here where torch is installed; CI has no torch)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest
from test_local_support import cli_env, dagflow_cli

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "gpu-train"
HAS_TORCH = importlib.util.find_spec("torch") is not None


def copy(tmp_path: Path) -> Path:
    workdir = tmp_path / "gpu-train"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("checkpoints", "models", "data", ".dagflow"))
    return workdir


def test_the_gpu_example_validates(tmp_path: Path) -> None:
    done = dagflow_cli("validate", str(copy(tmp_path) / "pipeline.yaml"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10 nodes" in done.stdout


@pytest.mark.parametrize("mode", ["transfer", "shared"])
def test_the_gpu_example_compiles_for_a_stock_pool(tmp_path: Path, mode: str) -> None:
    workdir = copy(tmp_path)
    done = dagflow_cli("compile", "pipeline.yaml", "-o", "out", "--data-mode", mode, "--run-id", "g", cwd=workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    submit = htcondor2.Submit((workdir / "out" / "train.sub").read_text())
    assert submit["request_gpus"] == "1"
    assert submit["gpus_minimum_memory"] == "8192" and submit["gpus_minimum_capability"] == "7.0"
    assert "CUDACapability" not in (workdir / "out" / "train.sub").read_text()  # an agent-only attribute
    assert submit["checkpoint_exit_code"] == "85"
    dag = (workdir / "out" / "gpu-train.dag").read_text()
    assert "GlobalMemoryMb" in dag  # {gpu.memory_mb}: the memory of the GPU the job was given
    assert "JOB evaluate.promote.us" in dag and "JOB train.publish.br" in dag


@pytest.mark.skipif(HAS_TORCH, reason="torch is installed here")
def test_without_torch_the_train_step_says_how_to_install_it(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    prepare = [sys.executable, "prepare.py", "--region", "us", "--out", "data/us", "--rows", "200"]
    subprocess.run(prepare, cwd=workdir, check=True, timeout=60)
    train = [sys.executable, "train.py", "--data", "data/us", "--ckpt", "ck", "--out", "models/us"]
    done = subprocess.run(train, cwd=workdir, capture_output=True, text=True, timeout=60, env=cli_env())
    assert done.returncode == 2, done.stdout + done.stderr
    assert "pip install -e '.[gpu]'" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.skipif(not HAS_TORCH, reason="needs torch (pip install -e '.[gpu]')")
def test_with_torch_the_train_step_checkpoints_each_epoch_and_ends_with_metrics(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    prepare = [sys.executable, "prepare.py", "--region", "us", "--out", "data/us", "--rows", "2000"]
    subprocess.run(prepare, cwd=workdir, check=True, timeout=60)
    train = [sys.executable, "train.py", "--data", "data/us", "--epochs", "3", "--gpu-memory-mb", "4096",
             "--ckpt", "ck", "--out", "models/us"]  # fmt: skip
    codes = [subprocess.run(train, cwd=workdir, timeout=300).returncode for _ in range(3)]
    assert codes == [85, 85, 0]
    metrics = json.loads((workdir / "models" / "us" / "metrics.json").read_text())
    assert metrics["epochs"] == 3 and metrics["batch_size"] == 512 and metrics["val_loss"] < 1.0
    assert (workdir / "models" / "us" / "model.pt").stat().st_size > 0
