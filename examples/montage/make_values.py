"""Write images.csv and pairs.csv, the coordinates of a Montage run of about --tasks tasks.

Three bands of uneven size (Montage's 2MASS j, h and k surveys), each a grid of tiles `rRcC`; every two
tiles that overlap (side by side, one above the other, or diagonal) make one mDiffFit pair. Diagonal pairs
are left out from the end until the run has exactly --tasks tasks (when it can).

    python make_values.py --tasks 991      # WfCommons' Montage size
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

PER_BAND = 4  # mConcatFit, mBgModel, mImgtbl, mAdd
FINAL = 1  # mViewer


def grids(scale: int) -> dict[str, tuple[int, int]]:
    return {"j": (scale, scale + 1), "h": (scale, scale), "k": (scale - 1, scale)}


def tiles(rows: int, cols: int) -> list[str]:
    return [f"r{r}c{c}" for r in range(rows) for c in range(cols)]


def pairs(rows: int, cols: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(side and vertical pairs, diagonal pairs) of a grid."""
    straight, diagonal = [], []
    for r in range(rows):
        for c in range(cols):
            if c + 1 < cols:
                straight.append((f"r{r}c{c}", f"r{r}c{c + 1}"))
            if r + 1 < rows:
                straight.append((f"r{r}c{c}", f"r{r + 1}c{c}"))
            if r + 1 < rows and c + 1 < cols:
                diagonal.append((f"r{r}c{c}", f"r{r + 1}c{c + 1}"))
    return straight, diagonal


def count(scale: int) -> int:
    total = FINAL
    for rows, cols in grids(scale).values():
        straight, diagonal = pairs(rows, cols)
        total += 2 * rows * cols + len(straight) + len(diagonal) + PER_BAND
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=115)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    scale = 2
    while count(scale) < args.tasks:
        scale += 1
    surplus = count(scale) - args.tasks
    images, overlapping = [], []
    for band, (rows, cols) in grids(scale).items():
        straight, diagonal = pairs(rows, cols)
        drop = min(surplus, len(diagonal))
        surplus -= drop
        images += [(band, image) for image in tiles(rows, cols)]
        overlapping += [(band, a, b) for a, b in straight + diagonal[: len(diagonal) - drop]]
    files = (("images.csv", ("band", "image"), images), ("pairs.csv", ("band", "a", "b"), overlapping))
    for name, header, rows in files:
        with open(args.out / name, "w", newline="") as handle:
            csv.writer(handle).writerows([header, *rows])
    tasks = 2 * len(images) + len(overlapping) + len(grids(scale)) * PER_BAND + FINAL
    print(f"{len(images)} images, {len(overlapping)} pairs: {tasks} tasks")


if __name__ == "__main__":
    main()
