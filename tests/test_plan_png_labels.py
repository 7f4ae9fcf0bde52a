"""`dagflow plan --png`: every box's labels lie inside the box, whatever the length of the node names
(long bold names once ran past the box's right edge). Measured on the PNG's pixels: each run of label
ink must fall within the interior of one box."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage
from test_local_support import cli_env

from dagflow.report.png import PLAIN_FILL

REPO = Path(__file__).resolve().parents[1]
MIN_BOX_PIXELS = 1000  # a box's fill; the fill enclosed by a letter is a few dozen pixels
INK_BELOW = 48  # label ink is #1d2329; box edges (#333), arrows and the title are lighter
BOLD_NAMES = """\
name: bold-names
matrix:
  region: [us, br]
steps:
  stage: {command: "true"}
  train: {needs: [stage], command: "true"}
  evaluate_promote: {needs: [train], command: "true"}
"""  # node names as wide as evaluate_promote.us set the boxes' width; their bold labels are wider than 7 px a letter
LONG_NAMES = """\
name: long-names
matrix:
  stage: [promote, holdout]
  region: [us, br]
steps:
  evaluate:
    command: "true"
  a_step_whose_name_is_far_too_long_for_any_box_in_the_picture:
    needs: [evaluate]
    over: [stage, region]
    command: "true"
"""


def plan_png(pipeline: Path, png: Path) -> np.ndarray:
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "plan", str(pipeline), "--png", str(png)],
        cwd=pipeline.parent, env=cli_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    import matplotlib.image

    return (matplotlib.image.imread(png)[:, :, :3] * 255).round().astype(int)


def box_interiors(pixels: np.ndarray) -> list[tuple[slice, slice]]:
    """The bounding rows and columns of each box's fill: text inside a box does not split its fill, only
    encloses small pieces of it (the insides of letters), left out by their size."""
    fill = [int(PLAIN_FILL[i : i + 2], 16) for i in (1, 3, 5)]
    labels, count = ndimage.label(np.all(pixels == fill, axis=2))
    sizes = ndimage.sum_labels(np.ones(labels.shape), labels, range(1, count + 1))
    found = ndimage.find_objects(labels)
    return [where for where, size in zip(found, sizes, strict=True) if where is not None and size >= MIN_BOX_PIXELS]


def ink_outside_boxes(pixels: np.ndarray) -> list[tuple[int, int]]:
    ink = np.all(pixels < INK_BELOW, axis=2)
    inside = np.zeros_like(ink)
    for rows, columns in box_interiors(pixels):
        inside[rows, columns] = True
    return [(int(y), int(x)) for y, x in zip(*np.nonzero(ink & ~inside), strict=True)]


@pytest.mark.parametrize(("pipeline", "boxes"), [("region-retrain", 13), (BOLD_NAMES, 6), (LONG_NAMES, 5)],
                         ids=["region-retrain", "bold-names", "long-names"])  # fmt: skip
@pytest.mark.slow
def test_every_label_lies_inside_its_box(tmp_path: Path, pipeline: str, boxes: int) -> None:
    if pipeline == "region-retrain":
        path = REPO / "examples" / "region-retrain" / "pipeline.yaml"
    else:
        path = tmp_path / "pipeline.yaml"
        path.write_text(pipeline)
    pixels = plan_png(path, tmp_path / "plan.png")
    assert len(box_interiors(pixels)) == boxes
    assert np.any(np.all(pixels < INK_BELOW, axis=2)), "no label ink at all: the check would see nothing"
    outside = ink_outside_boxes(pixels)
    assert outside == [], f"{len(outside)} label pixels outside every box, e.g. (row, column) {outside[:5]}"
