"""Views of big runs (#42 item 4): `dagflow status` of a real 1,000-node run prints a table per step
(counts by state, wall time, slowest node) and `status --json` has it as new keys; `dagflow report` of it
groups the DAG by step and region, has a steps table and a bounded timeline legend; a plan of 402
one-task steps is drawn as a handful of boxes with a legend of at most 11 entries; a timeline lane of
thousands of short attempts is a few rectangles; the PNG stays legible (labels at full size, at most
16,000 px a side) whatever the node count."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from test_local_support import cli_env
from test_report_support import assert_real_picture

from dagflow.palette import PALETTE
from dagflow.plan.expand import expand
from dagflow.report.dag_layout import MAX_BOXES, layout_plan
from dagflow.report.png import DPI, MAX_INCHES
from dagflow.report.timeline import OTHER_STEPS, Span, step_colours, timeline_svg
from dagflow.run.journal import FAILED, SUCCEEDED, JournalState, NodeRecord
from dagflow.run.layout import RunLayout
from dagflow.run.status import RunStatus
from dagflow.run.status_view import print_status
from dagflow.spec import load_spec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from report_scale import scale_pipeline  # benchmarks/report_scale.py's pipeline

RUN_TIMEOUT_S = 900  # a real 1,000-node run on a loaded machine; only here to stop a hang


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env={**cli_env(), "COLUMNS": "120"},
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real finished 1,000-node run in which train.r03.s042 failed (so evaluate.r03 did not run)."""
    work = tmp_path_factory.mktemp("scale")
    (work / "pipeline.yaml").write_text(scale_pipeline(1000, fail="r03.s042"))
    ran = dagflow("run", "pipeline.yaml", "--jobs", "4", "--run-id", "big", cwd=work)
    assert ran.returncode == 1, ran.stderr  # the run failed: one node did
    return work


def many_steps_pipeline(directory: Path) -> Path:
    """A Montage-like workflow of one-task steps: 100 mProject, 200 mDiff (each of two mProjects), one
    mConcatFit, 100 mBackground, one mAdd: 402 steps of one node each."""
    lines = ["name: montage-like", "steps:"]
    lines += [f'  mProject_{index:03d}: {{command: "true"}}' for index in range(100)]
    for index in range(200):
        pair = sorted({f"mProject_{index % 100:03d}", f"mProject_{(index * 7 + 1) % 100:03d}"})
        lines.append(f'  mDiff_{index:03d}: {{command: "true", needs: [{", ".join(pair)}]}}')
    lines.append(f'  mConcatFit: {{command: "true", needs: [{", ".join(f"mDiff_{i:03d}" for i in range(200))}]}}')
    lines += [f'  mBackground_{i:03d}: {{command: "true", needs: [mConcatFit, mProject_{i:03d}]}}' for i in range(100)]
    lines.append(f'  mAdd: {{command: "true", needs: [{", ".join(f"mBackground_{i:03d}" for i in range(100))}]}}')
    path = directory / "montage.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_status_of_a_1000_node_run_has_a_table_per_step(big_run: Path) -> None:
    shown = dagflow("status", "big", cwd=big_run)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    header = next(line for line in lines if line.startswith("step "))
    assert header.split() == ["step", "nodes", "succeeded", "failed", "upstream-failed", "wall", "slowest", "node",
                              "took"]  # fmt: skip
    rows = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 :][:3]}
    assert rows["fetch"][:3] == ["fetch", "10", "10"]
    assert rows["train"][:4] == ["train", "980", "979", "1"]
    assert rows["evaluate"][:4] == ["evaluate", "10", "9", "1"]  # evaluate.r03: upstream-failed
    for row in rows.values():
        assert row[-3].endswith("s") and row[-1].endswith("s")  # its wall time, its slowest node's time
        assert row[-2].startswith(row[0] + ".")  # the slowest node is one of the step's
    assert "train.r03.s042" in shown.stdout  # the failed node is still listed below

    as_json = json.loads(dagflow("status", "big", "--json", cwd=big_run).stdout)
    for key in ("run_id", "state", "counts", "total", "progress", "failed_stderr", "nodes"):  # kept as they were
        assert key in as_json
    steps = {row["step"]: row for row in as_json["steps"]}
    assert list(steps) == ["fetch", "train", "evaluate"]
    assert steps["train"]["counts"] == {"succeeded": 979, "failed": 1}
    assert steps["evaluate"]["counts"] == {"succeeded": 9, "upstream_failed": 1}
    nodes = {node["node"]: node for node in as_json["nodes"]}
    for step, row in steps.items():
        mine = [node for node in nodes.values() if node["step"] == step and node["started"] is not None]
        assert row["nodes"] == sum(1 for node in nodes.values() if node["step"] == step)
        assert row["started"] == min(node["started"] for node in mine)
        assert row["ended"] == max(node["ended"] for node in mine)
        slowest = max(mine, key=lambda node: node["ended"] - node["started"])
        assert row["slowest_s"] == round(slowest["ended"] - slowest["started"], 3)
        assert nodes[row["slowest"]]["step"] == step


@pytest.mark.slow
def test_report_of_a_1000_node_run_is_grouped_with_a_bounded_legend(big_run: Path) -> None:
    png = big_run / "dag.png"
    made = dagflow("report", "big", "--png", str(png), cwd=big_run)
    assert made.returncode == 0, made.stderr
    html = Path(made.stdout.splitlines()[0]).read_text(encoding="utf-8")
    assert "1000 nodes, one box per step" in html
    assert "1000 nodes as 30 boxes, grouped by step and region" in html  # train by region, the rest by node
    assert html.count('<g class="box"') == 3 + 30
    steps = html[html.index('<section id="steps">') : html.index("</section>", html.index('<section id="steps">'))]
    assert "3 steps: nodes by state" in steps and "<td>train</td>" in steps and '<td class="num">979</td>' in steps
    timeline = html[html.index('<section id="timeline">') :]
    legend = timeline[timeline.index('<div class="legend">') : timeline.index("</div>")]
    assert legend.count('class="chip"') == 3  # one per step, not one per node
    width, height = assert_real_picture(png)
    assert width < 2000 and height < 2000  # 30 boxes with labels at full size, not 1,000 boxes


def test_many_one_task_steps_are_grouped_and_their_legend_bounded(tmp_path: Path) -> None:
    plan = expand(load_spec(many_steps_pipeline(tmp_path)), run_id="layout")
    assert len(plan.steps) == len(plan.nodes) == 402
    layout = layout_plan(plan)
    assert [(box.label, len(box.members), box.layer) for box in layout.boxes] == [
        ("mProject*", 100, 0), ("mDiff*", 200, 1), ("mConcatFit", 1, 2), ("mBackground*", 100, 3), ("mAdd", 1, 4)
    ]  # fmt: skip
    assert len(layout_plan(plan, max_boxes=3).boxes) <= 3  # by runs of layers when stems are still too many

    sizes = dict.fromkeys(plan.steps, 1)
    colours, legend = step_colours(sizes)
    assert [label for label, _ in legend] == [
        "mProject* (100 steps)", "mDiff* (200 steps)", "mConcatFit", "mBackground* (100 steps)", "mAdd"
    ]  # fmt: skip
    assert colours["mDiff_017"] == colours["mDiff_199"] != colours["mProject_000"]
    two_each = {f"step{letter}{index}": 1 for index, letter in enumerate("abcdefghijklmnopqrstuvwxyz" * 2)}
    colours, legend = step_colours(two_each)  # 26 stems: the first 9 have colours, 34 steps are "other"
    assert len(legend) == len(PALETTE) and legend[0] == ("stepa* (2 steps)", PALETTE[0])
    assert legend[-1] == ("34 other steps", OTHER_STEPS) and colours["stepa0"] == colours["stepa26"]
    colours, legend = step_colours({"stage": 4, "train": 4, "evaluate": 4, "report": 1})  # a small run: as before
    assert list(colours.values()) == list(PALETTE[:4]) and legend == list(colours.items())


@pytest.mark.slow
def test_the_png_of_a_long_chain_keeps_full_size_labels(tmp_path: Path) -> None:
    """200 steps in a chain, one box each, would be 66,000 px wide: the PNG groups them into fewer boxes
    rather than shrinking its labels."""
    needs = [""] + [f", needs: [s{index - 1:03d}]" for index in range(1, 200)]
    steps = "".join(f'  s{index:03d}: {{command: "true"{after}}}\n' for index, after in enumerate(needs))
    (tmp_path / "chain.yaml").write_text(f"name: chain\nsteps:\n{steps}")
    png = tmp_path / "chain.png"
    made = subprocess.run(
        [sys.executable, "-m", "dagflow", "plan", str(tmp_path / "chain.yaml"), "--png", str(png)],
        env=cli_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    width, height = assert_real_picture(png)
    assert width < MAX_INCHES * DPI and height < 1000
    assert len(layout_plan(expand(load_spec(tmp_path / "chain.yaml"), run_id="chain")).boxes) <= MAX_BOXES


def test_a_lane_of_thousands_of_short_attempts_is_a_few_rectangles() -> None:
    spans = [Span(f"train.{index}", "train", 1, index * 0.01, index * 0.01 + 0.009, "vm", "1", index == 1000)
             for index in range(2000)]  # fmt: skip
    spans.append(Span("fetch.0", "fetch", 1, 20.0, 21.0, "vm", "1", False))  # a wide one: its own, as ever
    svg = timeline_svg(spans, {"train": PALETTE[0], "fetch": PALETTE[1]})
    assert svg.count("<rect ") == 4  # train before the failed attempt, it, train after it, fetch
    assert "1000 attempts of train on vm slot 1" in svg and "999 attempts of train" in svg
    assert "train.1000 (attempt 1) on vm slot 1" in svg and "fetch.0 (attempt 1)" in svg


def test_a_run_of_402_steps_lists_30_of_them_the_failed_first(tmp_path: Path) -> None:
    plan = expand(load_spec(many_steps_pipeline(tmp_path)), run_id="steps")
    records = {name: NodeRecord(SUCCEEDED, 1, 0, started=1.0, ended=2.0) for name in plan.nodes}
    records["mAdd"] = NodeRecord(FAILED, 1, 1, "exit code 1", started=3.0, ended=4.5)  # the last step in plan order
    layout = RunLayout(tmp_path / "runs", "steps")
    layout.run_dir.mkdir(parents=True)
    status = RunStatus(layout, plan, JournalState(nodes=records, runners=1, finished="failed"), False)
    console = Console(file=io.StringIO(), width=120)
    print_status(status, False, console=console)
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    header = lines.index(next(line for line in lines if line.startswith("step ")))
    rows = lines[header + 1 : header + 31]
    assert [row.split()[0] for row in rows] == [f"mProject_{index:03d}" for index in range(29)] + ["mAdd"]
    assert rows[-1].split() == ["mAdd", "1", "1", "1.5s", "mAdd", "1.5s"]  # no succeeded; 1 failed
    assert lines[header + 31] == "... and 372 more steps (372 nodes) not listed; status --json has every step"
