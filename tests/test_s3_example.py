"""examples/region-retrain-s3 end to end against a real S3 server (SeaweedFS): data staged from S3, models published,
promotion decided per region."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import boto3
import pytest

from dagflow.spec import load_spec

pytest.importorskip("sklearn")

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_example_validates_with_its_schedule() -> None:
    spec = load_spec(EXAMPLES / "region-retrain-s3" / "pipeline.yaml")
    assert spec.model.schedule is not None and spec.model.schedule.per == "region"


@pytest.mark.slow
def test_example_runs_against_an_s3_api_server(s3_endpoint: str, tmp_path: Path) -> None:
    for name in ("region-retrain", "region-retrain-s3"):
        shutil.copytree(EXAMPLES / name, tmp_path / name, ignore=shutil.ignore_patterns("data", "models", ".dagflow"))
    env = {**os.environ, "AWS_ENDPOINT_URL": s3_endpoint}
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket="dagflow-demo")

    def dagflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path / "region-retrain-s3",
                              env=env, capture_output=True, text=True, timeout=300, check=False)

    assert dagflow("transfer", "../region-retrain/source/", "s3://dagflow-demo/source/").returncode == 0
    # one region, as its per-region schedule line runs it (the whole pipeline is 20 nodes: too slow here)
    run = dagflow("schedule", "run", "pipeline.yaml", "--only", "region=jp")
    assert run.returncode == 0, run.stdout + run.stderr
    summary = run.stdout[run.stdout.index("promotions:"):]
    assert "jp  promoted: val_loss" in summary and "us " not in summary
    staged = tmp_path / "region-retrain-s3" / "data" / "jp" / "data.csv"
    assert staged.read_bytes() == (EXAMPLES / "region-retrain" / "source" / "jp" / "data.csv").read_bytes()
    assert not (tmp_path / "region-retrain-s3" / "data" / "us").exists()
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    pointer = json.loads(client.get_object(Bucket="dagflow-demo", Key="models/jp/latest")["Body"].read())
    published = client.list_objects_v2(Bucket="dagflow-demo", Prefix=f"models/jp/{pointer['run_id']}/")
    assert {o["Key"].rsplit("/", 1)[1] for o in published["Contents"]} == {"model.pkl", "val.csv", "train.json"}
    plan = (tmp_path / "region-retrain-s3" / ".dagflow" / "runs" / pointer["run_id"] / "plan.json").read_text()
    assert "testing" not in plan, "the fixture's dummy credentials appear nowhere in the plan"
