"""The per-region retraining example: its pipeline validates, expands, and its nodes produce a report.

Runs the plan's nodes in order with plain subprocesses (no engine), in a copy of the example.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dagflow.plan.expand import expand
from dagflow.plan.model import DAGFLOW_LAUNCHER
from dagflow.spec import load_spec

pytest.importorskip("sklearn")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "region-retrain"
REGIONS = ["us", "br", "de", "jp"]


def test_source_data_is_small_and_complete() -> None:
    files = sorted((EXAMPLE / "source").glob("*/data.csv"))
    assert [path.parent.name for path in files] == sorted(REGIONS)
    assert sum(path.stat().st_size for path in files) < 200_000


def test_pipeline_runs_end_to_end(tmp_path: Path) -> None:
    workdir = tmp_path / "region-retrain"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"))
    plan = expand(load_spec(workdir / "pipeline.yaml"))
    assert len(plan.nodes) == 3 * len(REGIONS) + 1
    assert plan.nodes["report"].parents == [f"evaluate.{region}" for region in REGIONS]

    for node in plan.nodes.values():  # plan.nodes is in a topological order
        argv = list(node.argv)
        if argv[0] == DAGFLOW_LAUNCHER:
            argv[:1] = [sys.executable, "-m", "dagflow"]
        elif argv[0] == "python":
            argv[0] = sys.executable
        done = subprocess.run(argv, cwd=plan.workdir, capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, f"{node.name}: {done.stderr}"

    for region in REGIONS:
        metrics = json.loads((workdir / "models" / region / "metrics.json").read_text())
        assert metrics["region"] == region
        assert 0 < metrics["val_loss"] < metrics["baseline_val_loss"]
    report = json.loads((workdir / "reports" / "report.json").read_text())
    assert report["summary"]["regions"] == len(REGIONS)
    assert "| region |" in (workdir / "reports" / "report.md").read_text()
