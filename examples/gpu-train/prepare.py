"""Write a region's synthetic regression data: train.csv and val.csv under --out.

    python prepare.py --region us --out data/us

y = sin(3 x1) + 0.5 x2^2 - x3 + noise, with a different slice of noise per region (deterministic).
Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import math
import random
from pathlib import Path

FEATURES = 3


def rows(region: str, count: int, split: str) -> list[list[float]]:
    rng = random.Random(f"gpu-train-{region}-{split}")
    out = []
    for _ in range(count):
        x = [rng.uniform(-1, 1) for _ in range(FEATURES)]
        y = math.sin(3 * x[0]) + 0.5 * x[1] ** 2 - x[2] + rng.gauss(0, 0.05)
        out.append([*x, y])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", required=True)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--rows", type=int, default=20000)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for split, count in (("train", args.rows), ("val", args.rows // 5)):
        with open(args.out / f"{split}.csv", "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow([*(f"x{i + 1}" for i in range(FEATURES)), "y"])
            writer.writerows(rows(args.region, count, split))


if __name__ == "__main__":
    main()
