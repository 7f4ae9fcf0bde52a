"""`dagflow status` of a run with promotion gates (`promote_if`) shows their verdicts, text and JSON, the same
for a condor run as for a local run of the same pipeline: each is read from the run's promotions/ directory,
where a condor run's verdicts are ingested from its promotion jobs' output (engines/condor/verdicts.py). On
the real pool (tests/condor_pool.py); its DAGMan files and job output are those test_condor_promotions.py
reads without the pool."""

from __future__ import annotations

import json

import pytest

from tests.condor_pool import Pool
from tests.test_condor_promotions import PIPELINE, SHOWN, promotion_lines

pytestmark = pytest.mark.condor_pool

TRAIN = """\
import os, sys
os.makedirs(f"out/{sys.argv[1]}", exist_ok=True)
open(f"out/{sys.argv[1]}/model.txt", "w").write(sys.argv[1])
"""

EVALUATE = """\
import json, sys
json.dump({"val_loss": {"us": 0.25, "de": 0.5}[sys.argv[1]]}, open(f"out/{sys.argv[1]}/metrics.json", "w"))
"""

# What a condor run's recorded verdict lacks (the numbers compared are not in the line its job prints), or
# names the run
UNSHARED = ("new", "old", "model", "run_id")


def test_status_shows_a_condor_runs_promotion_verdicts_as_it_shows_a_local_runs(condor_pool: Pool) -> None:
    pool = condor_pool
    shown: dict[str, tuple[list[str], list[dict]]] = {}
    for engine in ("local", "condor"):
        work = pool.workdir(f"promotions-{engine}")
        text = PIPELINE.replace("PUBLISHED", str(work / "published")).replace("POINTERS", str(work / "pointers"))
        for name, content in (("pipeline.yaml", text), ("train.py", TRAIN), ("evaluate.py", EVALUATE)):
            (work / name).write_text(content, encoding="utf-8")
        pool.give(work)
        submitted = pool.dagflow(["submit", "--engine", engine, "pipeline.yaml", "--json"], cwd=work)
        run_id = json.loads(submitted.stdout)["run_id"]
        assert pool.ended(work, run_id)["state"] == "succeeded"
        plain = pool.dagflow(["status", run_id], cwd=work)
        status = pool.status(work, run_id)
        promotions = json.loads(json.dumps(status["promotions"]).replace(str(work), "WORK"))
        promotions = [{k: v for k, v in record.items() if k not in UNSHARED} for record in promotions]
        shown[engine] = promotion_lines(plain.stdout), promotions
    assert shown["local"][0] == SHOWN
    assert [record["verdict"] for record in shown["local"][1]] == ["promoted", "promoted"]
    assert shown["condor"] == shown["local"]
