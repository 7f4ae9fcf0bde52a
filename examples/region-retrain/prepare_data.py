"""Generate the example's source data: one CSV per region, from scikit-learn's bundled diabetes set.

Run once; its output (source/<region>/data.csv) is committed, so the pipeline itself never generates
or downloads data. The "regions" stand in for regional data sets: the 442 patients are split into
disjoint cohorts by age (youngest quarter -> first region, ...), so each region's data has a different
distribution and the per-region models differ in a real way.

    python prepare_data.py --out source --regions us,br,de,jp
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
from sklearn.datasets import load_diabetes  # bundled with scikit-learn: nothing is downloaded


def region_slices(ages: np.ndarray, count: int) -> list[np.ndarray]:
    """Row indices for `count` disjoint, equal-sized cohorts ordered by age."""
    order = np.lexsort((np.arange(len(ages)), ages))  # by age, ties by row number: deterministic
    return np.array_split(order, count)


def write_region(path: Path, header: list[str], rows: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for row in rows:
            writer.writerow(f"{value:g}" for value in row)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("source"), help="output directory")
    parser.add_argument("--regions", default="us,br,de,jp", help="comma-separated region names")
    args = parser.parse_args()

    regions = [name for name in args.regions.split(",") if name]
    data = load_diabetes(scaled=False)
    table = np.column_stack([data.data, data.target])
    header = [*data.feature_names, "target"]
    for region, rows in zip(regions, region_slices(data.data[:, 0], len(regions)), strict=True):
        path = args.out / region / "data.csv"
        write_region(path, header, table[rows])
        ages = data.data[rows, 0]
        print(f"{path}: {len(rows)} rows, age {ages.min():g}-{ages.max():g}")


if __name__ == "__main__":
    main()
