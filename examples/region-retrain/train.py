"""Fit one region's model: polynomial features + ridge regression on the region's data.

Holds out a seeded validation split, which it writes next to the model for eval.py.

    python train.py --data data/us --out models/us --alpha 1.0 --degree 1
"""

from __future__ import annotations

import argparse
import json
import pickle
import time
from pathlib import Path

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import PolynomialFeatures, StandardScaler


def load_csv(path: Path) -> tuple[list[str], np.ndarray]:
    with path.open() as handle:
        header = handle.readline().strip().split(",")
    return header, np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)


def write_csv(path: Path, header: list[str], table: np.ndarray) -> None:
    np.savetxt(path, table, delimiter=",", header=",".join(header), comments="", fmt="%.10g")


def build_model(alpha: float, degree: int) -> Pipeline:
    return make_pipeline(PolynomialFeatures(degree=degree, include_bias=False), StandardScaler(), Ridge(alpha=alpha))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="directory holding data.csv")
    parser.add_argument("--out", type=Path, required=True, help="directory for the model and its split")
    parser.add_argument("--alpha", type=float, default=1.0, help="ridge regularisation strength")
    parser.add_argument("--degree", type=int, default=1, help="polynomial feature degree (1 = linear)")
    parser.add_argument("--val-fraction", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.alpha <= 0 or args.degree < 1:
        parser.error("--alpha must be > 0 and --degree >= 1")

    header, table = load_csv(args.data / "data.csv")
    train, val = train_test_split(table, test_size=args.val_fraction, random_state=args.seed)
    features, target = train[:, :-1], train[:, -1]

    started = time.perf_counter()
    model = build_model(args.alpha, args.degree).fit(features, target)
    fit_seconds = time.perf_counter() - started

    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "model.pkl").open("wb") as handle:
        pickle.dump(model, handle)
    write_csv(args.out / "val.csv", header, val)
    info = {
        "data": str(args.data),
        "features": header[:-1],
        "target": header[-1],
        "train_rows": len(train),
        "val_rows": len(val),
        "train_target_mean": float(target.mean()),
        "params": {"alpha": args.alpha, "degree": args.degree, "seed": args.seed},
        "fit_seconds": round(fit_seconds, 4),
    }
    (args.out / "train.json").write_text(json.dumps(info, indent=2) + "\n")
    train_mse = float(np.mean((model.predict(features) - target) ** 2))
    print(f"trained {args.out}: {len(train)} rows, train mse {train_mse:.1f}, {fit_seconds:.3f}s")


if __name__ == "__main__":
    main()
