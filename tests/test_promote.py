"""Publishing train outputs and promoting models: the spec fields, the plan nodes, the decision, and
whole runs of the local engine against a real S3 API server (SeaweedFS on loopback)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import boto3
import pytest

from dagflow.errors import SpecError
from dagflow.plan.expand import expand
from dagflow.promote.decide import PromotionInputError, decide, metric_value
from dagflow.spec import parse_spec

BUCKET = "dagflow-models"

PIPELINE = """\
name: promo
matrix:
  region: [us, br, de]
steps:
  train:
    kind: train
    command: [python, train.py, "{region}"]
    outputs:
      - out/{region}/model.txt
      - out/{region}/extra/
    publish: s3://dagflow-models/models/{region}/{run.id}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: [python, evaluate.py, "{region}"]
    inputs: [losses.json]
    metrics: out/{region}/metrics.json
    promote_if:
      metric: val_loss
      better: lower
      than: s3://dagflow-models/models/{region}/latest
"""

TRAIN = """\
import os, sys
region = sys.argv[1]
if region == os.environ.get("FAIL_REGION"):
    sys.exit("training failed on purpose")
os.makedirs(f"out/{region}/extra", exist_ok=True)
open(f"out/{region}/model.txt", "w").write(f"model for {region}\\n")
open(f"out/{region}/extra/vocab.txt", "w").write("a b c\\n")
"""

EVALUATE = """\
import json, sys
region = sys.argv[1]
losses = json.load(open("losses.json"))
json.dump({"val_loss": losses[region], "rows": 10}, open(f"out/{region}/metrics.json", "w"))
"""


def spec_of(text: str):
    return parse_spec(textwrap.dedent(text), "p.yaml")


def errors_of(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        spec_of(text)
    return [diagnostic.render() for diagnostic in caught.value.diagnostics]


def test_decision_both_ways() -> None:
    assert decide(0.2, None, "val_loss", "lower").verdict == "promoted"
    assert decide(0.2, 0.3, "val_loss", "lower").verdict == "promoted"
    assert decide(0.3, 0.2, "val_loss", "lower").verdict == "kept"
    assert decide(0.2, 0.2, "val_loss", "lower").verdict == "kept", "equal is not better"
    assert decide(0.9, 0.8, "auc", "higher").verdict == "promoted"
    assert decide(0.85, 0.8, "auc", "higher", min_delta=0.1).verdict == "kept"
    assert "0.3 > 0.2" not in decide(0.2, 0.3, "val_loss", "lower").reason
    with pytest.raises(PromotionInputError, match=r"'val_loss' is missing.*numbers there: rows"):
        metric_value({"rows": 3}, "val_loss", "metrics.json")
    with pytest.raises(PromotionInputError, match="not a finite number"):
        metric_value({"val_loss": "nan"}, "val_loss", "metrics.json")


def test_plan_has_publish_and_promote_nodes() -> None:
    plan = expand(spec_of(PIPELINE), run_id="promo-1")
    order = list(plan.nodes)
    assert order.index("train.us") < order.index("train.publish.us") < order.index("evaluate.promote.us")
    publish = plan.nodes["train.publish.us"]
    assert publish.argv == [
        "dagflow", "publish", "s3://dagflow-models/models/us/promo-1/", "out/us/model.txt", "out/us/extra/",
    ]
    assert publish.parents == ["train.us"]
    promote = plan.nodes["evaluate.promote.br"]
    assert promote.parents == ["evaluate.br", "train.publish.br"]
    assert promote.argv[:2] == ["dagflow", "promote"]
    args = dict(zip(promote.argv[2::2], promote.argv[3::2], strict=True))
    assert args["--than"] == "s3://dagflow-models/models/br/latest"
    assert args["--model"] == "s3://dagflow-models/models/br/promo-1/"
    assert args["--metrics"] == "out/br/metrics.json" and args["--node"] == "evaluate.promote.br"
    assert plan.steps["train.publish"].kind == "transfer" and plan.steps["train.publish"].retry_unless_exit == (2,)
    fetch = expand(spec_of("""
        name: f
        steps:
          fetch: {kind: transfer, from: s3://b-1/data/, to: data/}
          local: {kind: transfer, from: src/, to: data2/}
        """), run_id="f-1")
    assert fetch.nodes["fetch"].env == {}, "the cache keys an S3 fetch on its source's listing, not the run id"
    assert fetch.nodes["local"].env == {}


def test_publish_and_promote_are_validated_with_locations() -> None:
    errors = errors_of("""
        name: bad
        matrix: {region: [us]}
        steps:
          train:
            kind: command
            command: python train.py
            publish: s3://Bad_Bucket/models/{regoin}
          evaluate:
            kind: evaluate
            needs: [train]
            command: python eval.py
            promote_if:
              metric: val_loss
              better: lowest
              than: "s3://b-1/models/{region}/{run.id}/"
              model: trian
        """)
    text = "\n".join(errors)
    assert "p.yaml:8:14: steps.train.publish: unknown template variable {regoin}" in text
    assert "steps.train.publish: publish belongs to train steps (kind: train)" in text
    assert "steps.train.publish: publish uploads the step's outputs, but the step lists none" in text
    assert "not a valid S3 bucket name" in text
    assert "steps.evaluate.promote_if.better: expected 'lower' or 'higher', not 'lowest'" in text
    assert "did you mean 'lower'?" in text
    assert "p.yaml:13:5: steps.evaluate.promote_if: promote_if reads the new model's metric" in text
    assert "steps.evaluate.promote_if.than: the pointer must be the same for every run, but it uses {run.id}" in text
    assert "steps.evaluate.promote_if.than: 's3://b-1/models/{region}/{run.id}/' is a directory" in text
    assert "steps.evaluate.promote_if.model: model names 'trian', which this step does not need" in text
    assert "did you mean 'train'?" in text

    no_publisher = errors_of("""
        name: bad
        steps:
          train: {kind: train, command: python t.py, outputs: [m.pkl], publish: s3://b-1/models}
          evaluate:
            kind: evaluate
            needs: [train]
            command: python eval.py
            metrics: m.json
            promote_if: {metric: val_loss, better: lower, than: s3://b-1/latest, model: train}
          other:
            kind: evaluate
            needs: [evaluate]
            command: python eval.py
            metrics: m.json
            promote_if: {metric: val_loss, better: lower, than: s3://b-1/latest}
        """)
    assert any("steps.train.publish: 's3://b-1/models' is a file name" in e and "s3://b-1/models/" in e
               for e in no_publisher)
    assert any("steps.other.promote_if: promotion needs a published model" in e for e in no_publisher)


@pytest.fixture
def project(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    return tmp_path


def run(project: Path, losses: dict[str, float], **env: str) -> subprocess.CompletedProcess[str]:
    (project / "losses.json").write_text(json.dumps(losses))
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--jobs", "2", "--runs-dir", ".runs"],
        cwd=project, capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False,
    )


def pointer(s3_endpoint: str, region: str) -> dict:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    return json.loads(client.get_object(Bucket=BUCKET, Key=f"models/{region}/latest")["Body"].read())


@pytest.mark.slow
def test_runs_promote_only_better_models_and_say_so(project: Path, s3_endpoint: str) -> None:
    first = run(project, {"us": 0.5, "br": 0.5, "de": 0.5}, FAIL_REGION="de")
    assert first.returncode == 1, first.stdout + first.stderr
    assert "promotions:" in first.stdout
    lines = first.stdout[first.stdout.index("promotions:"):].splitlines()
    assert any(line.split()[:2] == ["us", "promoted:"] and "no current model" in line for line in lines)
    assert any(line.split()[:2] == ["de", "failed:"] and "a node it needs failed" in line for line in lines)
    run_one = pointer(s3_endpoint, "us")["run_id"]
    assert pointer(s3_endpoint, "us")["model"] == f"s3://{BUCKET}/models/us/{run_one}/"
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=BUCKET, Prefix=f"models/us/{run_one}/")["Contents"]}
    assert keys == {f"models/us/{run_one}/model.txt", f"models/us/{run_one}/vocab.txt"}
    verdict = json.loads((project / ".runs" / run_one / "promotions" / "evaluate.promote.us.json").read_text())
    assert (verdict["verdict"], verdict["new"], verdict["old"]) == ("promoted", 0.5, None)

    second = run(project, {"us": 0.25, "br": 0.75, "de": 0.1})
    assert second.returncode == 0, second.stdout + second.stderr
    summary = second.stdout[second.stdout.index("promotions:"):]
    assert "us  promoted: val_loss 0.25 < 0.5 of the current model" in summary
    assert "br  kept: val_loss 0.75 is not lower than 0.5 of the current model" in summary
    assert "de  promoted: val_loss 0.1; there was no current model" in summary
    run_two = pointer(s3_endpoint, "us")["run_id"]
    assert run_two != run_one and pointer(s3_endpoint, "us")["previous"] == f"s3://{BUCKET}/models/us/{run_one}/"
    assert pointer(s3_endpoint, "br")["run_id"] == run_one, "a worse model leaves the pointer where it was"
    assert pointer(s3_endpoint, "us")["metrics"] == {"val_loss": 0.25, "rows": 10}

    (project / "losses.json").write_text(json.dumps({"us": 0.1, "br": 0.1, "de": 0.1}))
    broken = subprocess.run(
        [sys.executable, "-m", "dagflow", "promote", "--metrics", "losses.json", "--metric", "auc", "--better",
         "higher", "--than", f"s3://{BUCKET}/models/us/latest", "--model", f"s3://{BUCKET}/models/us/{run_two}/",
         "--run-id", "x", "--node", "evaluate.promote.us"],
        cwd=project, capture_output=True, text=True, check=False,
    )
    assert broken.returncode == 2 and "failed: metrics file losses.json: metric 'auc' is missing" in broken.stderr
    assert "Traceback" not in broken.stderr


@pytest.mark.slow
def test_promotion_to_local_pointer_and_publish_collisions(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a/model.txt").write_text("a")
    (tmp_path / "model.txt").write_text("b")
    (tmp_path / "metrics.json").write_text('{"auc": 0.9}')

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True,
                              text=True, check=False, env={**os.environ, "DAGFLOW_RUN_DIR": str(tmp_path / "run")})

    clash = cli("publish", "pub/1/", "a/", "model.txt")
    assert clash.returncode == 2 and "would both publish 'model.txt'" in clash.stderr
    assert cli("publish", "pub/1/", "a/").returncode == 0
    promote = ("promote", "--metrics", "metrics.json", "--metric", "auc", "--better", "higher", "--than",
               "pub/latest", "--model", "pub/1/", "--run-id", "r1", "--node", "eval.promote")
    assert "eval.promote: promoted" in cli(*promote).stdout
    assert json.loads((tmp_path / "pub/latest").read_text())["model"] == "pub/1/"
    assert "eval.promote: kept" in cli(*promote).stdout
    verdict = json.loads((tmp_path / "run/promotions/eval.promote.json").read_text())
    assert (verdict["verdict"], verdict["old"], verdict["new"]) == ("kept", 0.9, 0.9)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ('{"val_loss": 1' + "0" * 400 + "}", "an integer of about 401 digits, too large for a float"),
        ('{"val_loss": 1e400}', "inf"),
        ('{"val_loss": NaN}', "nan"),
        ('{"val_loss": -Infinity}', "-inf"),
        ('{"val_loss": "inf"}', "'inf'"),
    ],
)
def test_non_finite_or_overflowing_metrics_are_bad_input(tmp_path: Path, text: str, shown: str) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model/m.txt").write_text("m")
    (tmp_path / "metrics.json").write_text(text)
    args = ["promote", "--metrics", "metrics.json", "--metric", "val_loss", "--better", "lower", "--than", "latest",
            "--model", "model/", "--run-id", "r1", "--node", "eval.promote"]
    result = subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"metrics file metrics.json: metric 'val_loss' is {shown}, not a finite number" in result.stderr
    assert not (tmp_path / "latest").exists()

    (tmp_path / "metrics.json").write_text('{"val_loss": 0.5}')
    (tmp_path / "latest").write_text(text.replace("{", '{"model": "old/", "metrics": {') + "}")
    against = subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True,
                             check=False)
    assert against.returncode == 2, against.stderr
    assert f"current pointer latest: metric 'val_loss' is {shown}" in against.stderr
    inf_delta = subprocess.run([sys.executable, "-m", "dagflow", *args, "--min-delta", "inf"], cwd=tmp_path,
                               capture_output=True, text=True, check=False)
    assert inf_delta.returncode == 2 and "--min-delta must be a finite number" in inf_delta.stderr


SHARED_PREFIX = PIPELINE.replace("/models/{region}/{run.id}/", "/models/{region}/")


def test_a_promoted_model_must_publish_to_a_prefix_of_its_own_run() -> None:
    """#40 item 3: with one prefix for every run, run 2's publish overwrites the promoted model before
    its gate runs; a gate that keeps run 1 leaves the pointer naming run 2's worse files."""
    errors = errors_of(SHARED_PREFIX)
    assert errors == [
        "p.yaml:11:14: steps.train.publish: step 'evaluate' promotes this model, so each run must publish to a "
        "prefix of its own: without {run.id} the next run's publish overwrites the promoted model before its "
        "promotion is decided; add {run.id}: s3://dagflow-models/models/{region}/{run.id}/"
    ], errors
    local = errors_of(SHARED_PREFIX.replace("s3://dagflow-models/", "store/"))
    assert len(local) == 1 and "; add {run.id}: store/models/{region}/{run.id}/" in local[0]
    spec_of(SHARED_PREFIX.replace("    promote_if:", "    unused:").split("    unused:")[0])  # no gate: allowed


def run_pipeline(project: Path, text: str, losses: dict[str, float]) -> subprocess.CompletedProcess[str]:
    (project / "pipeline.yaml").write_text(text)
    return run(project, losses)


@pytest.mark.slow
def test_a_shared_prefix_is_refused_before_anything_runs_on_s3(project: Path, s3_endpoint: str) -> None:
    result = run_pipeline(project, SHARED_PREFIX, {"us": 0.5, "br": 0.5, "de": 0.5})
    assert result.returncode == 2, result.stdout + result.stderr
    assert "pipeline.yaml:11:14: steps.train.publish: step 'evaluate' promotes this model" in result.stderr
    assert "add {run.id}: s3://dagflow-models/models/{region}/{run.id}/" in result.stderr
    assert "Traceback" not in result.stderr
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    assert "Contents" not in client.list_objects_v2(Bucket=BUCKET), "nothing was published"
    assert not (project / "out").exists(), "nothing ran"


@pytest.mark.slow
def test_a_worse_second_run_leaves_the_pointer_on_the_first_model_locally(tmp_path: Path) -> None:
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    local = PIPELINE.replace("s3://dagflow-models/", "store/")
    refused = run_pipeline(tmp_path, local.replace("/{run.id}/", "/"), {"us": 0.5, "br": 0.5, "de": 0.5})
    assert refused.returncode == 2 and "add {run.id}: store/models/{region}/{run.id}/" in refused.stderr
    assert not (tmp_path / "store").exists()

    for round_, loss in (("one", 0.25), ("two", 0.75)):  # run 2 trains a different, worse model
        (tmp_path / "train.py").write_text(TRAIN.replace("model for", f"model {round_} for"))
        result = run_pipeline(tmp_path, local, {"us": loss, "br": loss, "de": loss})
        assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout[result.stdout.index("promotions:") :].splitlines()[:4]
    assert summary[1].startswith("  us  kept: val_loss 0.75"), summary
    status = [sys.executable, "-m", "dagflow", "status", "--runs-dir", ".runs"]
    shown = subprocess.run(status, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    assert shown.stdout[shown.stdout.index("promotions:") :].splitlines()[:4] == summary  # as the run said
    shown = subprocess.run([*status, "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True)
    promotions = json.loads(shown.stdout)["promotions"]
    assert [(p["label"], p["verdict"], p["new"], p["old"]) for p in promotions] == [
        (region, "kept", 0.75, 0.25) for region in ("us", "br", "de")
    ]
    current = json.loads((tmp_path / "store/models/us/latest").read_text())
    assert current["metrics"]["val_loss"] == 0.25
    assert (tmp_path / current["model"] / "model.txt").read_text() == "model one for us\n"
