"""The DAG picture: layers and grouping of real plans (13 nodes one by one, 4,921 grouped by step and
region), and `dagflow plan --png` writing a real PNG."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_report_support import assert_real_picture

from dagflow.plan.expand import expand
from dagflow.report.dag_layout import layout_plan
from dagflow.report.svg import dag_svg
from dagflow.spec import load_spec

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "region-retrain" / "pipeline.yaml"


def fanout_pipeline(directory: Path, regions: int = 41, trials: int = 40) -> Path:
    """The 4,921-node shape of benchmarks/local_overhead.py."""
    region_values = ", ".join(f"r{i:02d}" for i in range(regions))
    trial_values = ", ".join(f"t{i:02d}" for i in range(trials))
    path = directory / "fanout.yaml"
    path.write_text(
        f"name: fanout\nmatrix:\n  region: [{region_values}]\n  trial: [{trial_values}]\nsteps:\n"
        '  a: {command: "true"}\n  b: {command: "true", needs: [a]}\n  c: {command: "true", needs: [b]}\n'
        '  aggregate: {command: "true", needs: [c], over: [region, trial]}\n'
    )
    return path


def test_small_plan_gets_one_box_per_node_in_topological_layers() -> None:
    plan = expand(load_spec(EXAMPLE), run_id="layout")
    layout = layout_plan(plan)
    assert not layout.grouped and len(layout.boxes) == 13
    layer = {box.members[0]: box.layer for box in layout.boxes}
    assert {layer[f"{step}.{r}"] for step in ("stage",) for r in ("us", "br", "de", "jp")} == {0}
    assert [layer["train.us"], layer["evaluate.us"], layer["report"]] == [1, 2, 3]
    for parent, child in layout.edges:  # every edge points to a later layer, left to right
        assert layout.boxes[parent].layer < layout.boxes[child].layer
        assert layout.boxes[parent].x < layout.boxes[child].x
    assert len(layout.edges) == sum(len(node.parents) for node in plan.nodes.values())
    positions = {(box.x, box.y) for box in layout.boxes}
    assert len(positions) == 13  # no two boxes on top of each other
    svg = dag_svg(layout, {name: "succeeded" for name in plan.nodes})
    assert svg.count('<g class="box"') == 13 and svg.count("<path d=") == 12 + 1  # 12 edges + the arrowhead


def test_big_plan_is_grouped_by_step_and_region(tmp_path: Path) -> None:
    plan = expand(load_spec(fanout_pipeline(tmp_path)), run_id="layout")
    assert len(plan.nodes) == 4921
    layout = layout_plan(plan)
    assert layout.grouped and len(layout.boxes) == 3 * 41 + 1
    sizes = sorted({len(box.members) for box in layout.boxes})
    assert sizes == [1, 40]  # a region's 40 trials per box; the aggregate alone
    assert sum(len(box.members) for box in layout.boxes) == 4921
    by_step = layout_plan(plan, max_boxes=len(plan.steps))
    assert [(box.step, len(box.members), box.layer) for box in by_step.boxes] == [
        ("a", 1640, 0), ("b", 1640, 1), ("c", 1640, 2), ("aggregate", 1, 3)
    ]  # fmt: skip
    states = {name: ("failed" if name == "b.r03.t07" else "succeeded") for name in plan.nodes}
    svg = dag_svg(layout, states)
    assert svg.count("39 succeeded, 1 failed") == 1  # the group holding the failed node says so
    assert svg.count('<g class="box"') == 124


@pytest.mark.slow
def test_plan_png(tmp_path: Path) -> None:
    small = tmp_path / "small.png"
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "plan", str(EXAMPLE), "--png", str(small)],
        env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(small)
    width, height = assert_real_picture(small)
    assert width > height  # four layers left to right
    big = tmp_path / "big.png"
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "plan", str(fanout_pipeline(tmp_path)), "--png", str(big)],
        env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    width, height = assert_real_picture(big)
    assert height > width  # 41 region boxes per column
