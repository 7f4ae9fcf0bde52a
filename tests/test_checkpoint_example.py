"""examples/spot-training runs here end to end (`dagflow run`, as its README says), every epoch once per
region through seven checkpoint restarts, and compiles for a spot HTCondor pool (transfer mode)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest

from dagflow.engines.condor.compile import compile_plan
from dagflow.plan.expand import expand
from dagflow.spec import load_spec
from tests.checkpoint_support import epochs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "spot-training"
REPO = EXAMPLE.parents[1]


def copy(tmp_path: Path) -> Path:
    workdir = tmp_path / "spot-training"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("checkpoints", "models", ".dagflow"))
    return workdir


@pytest.mark.slow
def test_the_example_runs_locally_through_its_checkpoint_restarts(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}  # nodes' python comes from dagflow
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", str(workdir / "pipeline.yaml"), "--run-id", "spot"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for region in ("us", "br"):
        assert epochs(workdir / "checkpoints" / region / "epochs.log") == list(range(1, 9))
        metrics = json.loads((workdir / "models" / region / "metrics.json").read_text())
        assert metrics["epochs"] == 8 and metrics["train_loss"] < 0.05
    status = subprocess.run(
        [sys.executable, "-m", "dagflow", "status", "spot", "--json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    nodes = {node["node"]: node for node in json.loads(status.stdout)["nodes"]}
    assert {name: (n["state"], n["attempts"], n["restarts"]) for name, n in nodes.items()} == {
        "train.us": ("succeeded", 1, 7),
        "train.br": ("succeeded", 1, 7),
    }


def test_the_example_compiles_for_a_spot_pool(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    plan = expand(load_spec(workdir / "pipeline.yaml"))
    compile_plan(plan, tmp_path / "out", data_mode="transfer")
    submit = htcondor2.Submit((tmp_path / "out" / "train.sub").read_text())
    assert submit["checkpoint_exit_code"] == "85"
    assert submit["transfer_checkpoint_files"] == "checkpoints"  # checkpoints/{region}: each job holds its own
    assert submit["when_to_transfer_output"] == "ON_EXIT_OR_EVICT"
