"""A condor run's promotion verdicts come back in its promotion jobs' output (engines/condor/verdicts.py):
recorded into the run directory, where the run summary and the report read them."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

from dagflow.engines.condor.verdicts import record_verdicts_seen, verdict_line
from dagflow.plan.expand import expand
from dagflow.plan.index import PlanIndex
from dagflow.run.journal import NodeRecord
from dagflow.run.layout import RunLayout
from dagflow.run.promotions import promotion_lines, promotion_records, read_verdict
from dagflow.spec import parse_spec
from tests.test_condor_promotions import PIPELINE as PROMOTING

PIPELINE = PROMOTING.replace("PUBLISHED", "published").replace("POINTERS", "promoted")


def test_the_verdict_line_of_a_promotion_job_is_recorded_once_per_attempt(tmp_path: Path) -> None:
    plan = expand(parse_spec(textwrap.dedent(PIPELINE), "p.yaml"), run_id="promo-1")
    layout = RunLayout(tmp_path, "promo-1")
    layout.create(plan, engine="condor")
    layout.stdout_path("evaluate.promote.us").write_text(
        "evaluate.promote.us: noise: not a verdict\n"
        "evaluate.promote.us: promoted: val_loss 0.5; there was no current model\n"
    )
    layout.stderr_path("evaluate.promote.de").write_text("evaluate.promote.de: failed: metrics file missing\n")
    records = {
        "evaluate.promote.us": NodeRecord(state="succeeded", attempts=1),
        "evaluate.promote.de": NodeRecord(state="failed", attempts=1),
    }
    record_verdicts_seen(layout, PlanIndex.of(plan), records)
    us = read_verdict(layout.run_dir, "evaluate.promote.us")
    assert us is not None
    assert (us["verdict"], us["reason"], us["metric"], us["better"]) == (
        "promoted", "val_loss 0.5; there was no current model", "val_loss", "lower",
    )  # fmt: skip
    assert (us["pointer"], us["model"], us["run_id"]) == ("promoted/us/latest", "published/promo-1/us/", "promo-1")
    states = {name: "succeeded" for name in plan.nodes} | {"evaluate.promote.de": "failed"}
    assert promotion_lines(promotion_records(layout.run_dir, states)) == [
        "promotions:",
        "  us  promoted: val_loss 0.5; there was no current model",
        "  de  failed: metrics file missing",
    ]

    # the next attempt's output replaces it; an unchanged output is not read again
    verdict_file = layout.run_dir / "promotions" / "evaluate.promote.us.json"
    output = layout.stdout_path("evaluate.promote.us")
    output.write_text("evaluate.promote.us: kept: val_loss 0.6 is not lower than 0.5 of the current model\n")
    os.utime(output, (verdict_file.stat().st_mtime + 5,) * 2)
    record_verdicts_seen(layout, PlanIndex.of(plan), records)
    assert read_verdict(layout.run_dir, "evaluate.promote.us")["verdict"] == "kept"  # type: ignore[index]
    output.write_text("evaluate.promote.us: promoted: changed under it\n")
    os.utime(output, (verdict_file.stat().st_mtime - 5,) * 2)
    record_verdicts_seen(layout, PlanIndex.of(plan), records)
    assert read_verdict(layout.run_dir, "evaluate.promote.us")["verdict"] == "kept"  # type: ignore[index]


def test_only_a_verdict_line_of_that_node_counts() -> None:
    assert verdict_line("a.promote: promoted: x\nb.promote: kept: y\n", "a.promote") == ("promoted", "x")
    assert verdict_line("a.promote.us: promoted: x\n", "a.promote") is None
    assert verdict_line("a.promote: maybe: x\n", "a.promote") is None
