"""The Montage example (#42 item 3): a WfCommons-shaped irregular DAG, pairwise and uneven fan-outs, from a
pipeline under 200 lines whose size does not grow with the run: its shape, its size at 991 tasks, and a
real local run whose mosaic matches what the tiles were made with."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from dagflow.plan.expand import expand
from dagflow.spec import load_spec

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "montage"
BANDS = ["j", "h", "k"]
ONE_STEP_PER_TASK_BYTES = 616 * 1024  # the 991-task Montage written one step per task (issue #42)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def copy(tmp_path: Path) -> Path:
    workdir = tmp_path / "montage"
    shutil.copytree(EXAMPLE, workdir, ignore=shutil.ignore_patterns("work", "mosaic.*", ".dagflow"))
    return workdir


def test_the_dag_has_montage_shape_with_one_diff_per_overlapping_pair() -> None:
    plan = expand(load_spec(EXAMPLE / "pipeline.yaml"), run_id="r1")
    images, pairs = rows(EXAMPLE / "images.csv"), rows(EXAMPLE / "pairs.csv")
    per_step = Counter(node.step for node in plan.nodes.values())
    assert per_step == {
        "project": len(images), "diff": len(pairs), "concat": 3, "bgmodel": 3, "background": len(images),
        "imgtbl": 3, "add": 3, "viewer": 1,
    }  # fmt: skip
    assert len(plan.nodes) == 115
    tiles = Counter(row["band"] for row in images)
    assert len(set(tiles.values())) == len(BANDS)  # uneven: each band has its own number of tiles
    for pair in pairs:
        band, a, b = pair["band"], pair["a"], pair["b"]
        node = plan.nodes[f"diff.{band}.{a}.{b}"]
        assert node.parents == [f"project.{band}.{a}", f"project.{band}.{b}"]
        assert node.argv[-3:] == [f"work/{band}/proj/{a}.json", f"work/{band}/proj/{b}.json",
                                  f"work/{band}/diff/{a}-{b}.json"]
    for band in BANDS:
        diffs = [f"diff.{p['band']}.{p['a']}.{p['b']}" for p in pairs if p["band"] == band]
        assert plan.nodes[f"concat.{band}"].parents == diffs
        image = next(row["image"] for row in images if row["band"] == band)
        assert plan.nodes[f"background.{band}.{image}"].parents == [f"project.{band}.{image}", f"bgmodel.{band}"]
    assert plan.nodes["viewer"].parents == ["add.j", "add.h", "add.k"]


def test_991_tasks_take_well_under_a_tenth_of_one_step_per_task(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    done = subprocess.run([sys.executable, "make_values.py", "--tasks", "991"], cwd=workdir, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    plan = expand(load_spec(workdir / "pipeline.yaml"), run_id="r1")
    assert len(plan.nodes) == 991
    assert sum(len(node.parents) for node in plan.nodes.values()) > 2 * 492  # every pair needs two tiles
    written = sum((workdir / name).stat().st_size for name in ("pipeline.yaml", "images.csv", "pairs.csv"))
    assert written < ONE_STEP_PER_TASK_BYTES / 10 / 4, written  # measured: 11,063 bytes
    assert len((workdir / "pipeline.yaml").read_text().splitlines()) < 200


def check_mosaic(workdir: Path) -> None:
    """Each band's background model finds the offset every tile was made with (up to their mean), and the
    picture holds the three bands."""
    for band in BANDS:
        corrections = json.loads((workdir / "work" / band / "corrections.json").read_text())
        tiles = (workdir / "work" / band / "proj").glob("*.json")
        made = {path.stem: json.loads(path.read_text())["offset"] for path in tiles}
        mean = sum(made.values()) / len(made)
        assert sorted(corrections) == sorted(made)
        assert all(abs(corrections[image] - (made[image] - mean)) < 0.1 for image in made), (band, corrections)
    summary = json.loads((workdir / "mosaic.json").read_text())
    assert {band: summary[band]["tiles"] for band in BANDS} == Counter(r["band"] for r in rows(workdir / "images.csv"))
    assert (workdir / "mosaic.ppm").read_text().startswith("P3 26 20 255\n")


@pytest.mark.slow
def test_the_example_runs_locally_and_its_mosaic_is_right(tmp_path: Path) -> None:
    workdir = copy(tmp_path)
    run = [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--jobs", "2"]
    done = subprocess.run(run, cwd=workdir, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "115 succeeded" in done.stdout
    check_mosaic(workdir)
