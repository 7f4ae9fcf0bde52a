"""`dagflow status` of a condor run shows its promotion verdicts (text and `status --json`) as a local run's
does: read from the run's promotions/, where the ingest put them (engines/condor/verdicts.py), the same from
a run directory made read-only. The DAGMan files and job output are those of the pool run in
test_condor_promotions_pool.py."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from condor_runs import prepare_condor

from dagflow.engines.registry import read_run_status
from dagflow.plan.expand import expand
from dagflow.spec import parse_spec
from tests.condor_helpers import utc  # noqa: F401 (an autouse fixture)
from tests.run_dir_support import entries, read_only
from tests.test_condor_ingest_again import json_of, text_of

POOL = Path(__file__).parent / "data" / "condor-pool"
CLUSTER = 2634  # the DAGMan job that wrote them

PIPELINE = """\
name: gate
matrix:
  region: [us, de]
steps:
  train:
    kind: train
    command: python3 train.py {region}
    outputs:
      - out/{region}/model.txt
    publish: PUBLISHED/{run.id}/{region}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: python3 evaluate.py {region}
    inputs: ["out/{region}/model.txt"]
    outputs: ["out/{region}/metrics.json"]
    metrics: out/{region}/metrics.json
    promote_if: {metric: val_loss, better: lower, than: "POINTERS/{region}/latest"}
"""

SHOWN = [
    "promotions:",
    "  us  promoted: val_loss 0.25; there was no current model",
    "  de  promoted: val_loss 0.5; there was no current model",
]


def promotion_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return lines[lines.index("promotions:") :][:3] if "promotions:" in lines else []


def test_status_of_a_condor_run_shows_its_promotion_verdicts_and_reads_the_same_read_only(tmp_path: Path) -> None:
    text = PIPELINE.replace("PUBLISHED", "/models").replace("POINTERS", "/pointers")
    plan = expand(parse_spec(textwrap.dedent(text), "pipeline.yaml"), run_id="gate-1")
    prepared = prepare_condor(plan, tmp_path)
    layout = prepared.layout
    for path in POOL.glob("gate.*"):
        name = path.name.removeprefix("gate.")
        if name.endswith(".out"):
            shutil.copy(path, layout.stdout_path(name.removesuffix(".out")))
        else:
            shutil.copy(path, prepared.dag.parent / ("dagflow.jobs.log" if name == "jobs.log" else path.name))
    prepared.record.add_submission(layout.run_dir, CLUSTER)

    status = read_run_status(layout, ingest=True)  # as `dagflow status` reads it: ingested first
    assert status.state == "succeeded"
    shown = text_of(status)
    assert promotion_lines(shown) == SHOWN
    promotions = status.to_dict()["promotions"]
    assert [(p["label"], p["node"], p["verdict"], p["metric"], p["better"], p["pointer"]) for p in promotions] == [
        ("us", "evaluate.promote.us", "promoted", "val_loss", "lower", "/pointers/us/latest"),
        ("de", "evaluate.promote.de", "promoted", "val_loss", "lower", "/pointers/de/latest"),
    ]
    files = entries(layout.run_dir)
    views = (text_of(read_run_status(layout, ingest=True)), json_of(read_run_status(layout, ingest=True)))
    assert views[0] == shown and entries(layout.run_dir) == files, "status of an ingested run only reads"
    with read_only(layout.run_dir):
        again = read_run_status(layout, ingest=True)
        assert (text_of(again), json_of(read_run_status(layout, ingest=True))) == views
    assert entries(layout.run_dir) == files
