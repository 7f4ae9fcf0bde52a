"""The per-region retraining example, the README's main job: `dagflow run` on a copy of it, end to end,
with PATH stripped of this venv so the nodes' `python` must come from dagflow itself."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagflow.plan.expand import expand
from dagflow.spec import load_spec

pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "region-retrain"
REGIONS = ["us", "br", "de", "jp"]


def test_source_data_is_small_and_complete() -> None:
    files = sorted((EXAMPLE / "source").glob("*/data.csv"))
    assert [path.parent.name for path in files] == sorted(REGIONS)
    assert sum(path.stat().st_size for path in files) < 200_000


@pytest.mark.slow
def test_pipeline_runs_end_to_end(tmp_path: Path) -> None:
    workdir = tmp_path / "region-retrain"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"))
    plan = expand(load_spec(workdir / "pipeline.yaml"))
    assert len(plan.nodes) == 3 * len(REGIONS) + 1
    assert plan.nodes["report"].parents == [f"evaluate.{region}" for region in REGIONS]

    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    run = [sys.executable, "-m", "dagflow", "run", str(workdir / "pipeline.yaml"), "--jobs", "2"]
    done = subprocess.run(run, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "13" in done.stdout

    for region in REGIONS:
        metrics = json.loads((workdir / "models" / region / "metrics.json").read_text())
        assert metrics["region"] == region
        assert 0 < metrics["val_loss"] < metrics["baseline_val_loss"]
    report = json.loads((workdir / "reports" / "report.json").read_text())
    assert report["summary"]["regions"] == len(REGIONS)
    assert "| region |" in (workdir / "reports" / "report.md").read_text()

    # a second run finds every node unchanged and skips it
    again = subprocess.run(run, cwd=workdir, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    status = subprocess.run([sys.executable, "-m", "dagflow", "status", "latest", "--json"], cwd=workdir,
                            env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    states = {node["node"]: node["state"] for node in json.loads(status.stdout)["nodes"]}
    assert set(states.values()) == {"cached"}, states
