"""Evaluate one region's model on its held-out split and write metrics.json.

`val_loss` is the validation mean squared error (the search's objective); `baseline_val_loss` is what
predicting the training mean would score, so a model that learned nothing shows up at once.

    python eval.py models/us --out models/us/metrics.json
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np
from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("model_dir", type=Path, help="directory train.py wrote")
    parser.add_argument("--out", type=Path, required=True, help="metrics file to write")
    parser.add_argument("--region", default=None, help="region name recorded in the metrics")
    args = parser.parse_args()

    with (args.model_dir / "model.pkl").open("rb") as handle:
        model = pickle.load(handle)  # written by our own train.py
    info = json.loads((args.model_dir / "train.json").read_text())
    val = np.loadtxt(args.model_dir / "val.csv", delimiter=",", skiprows=1, ndmin=2)
    features, target = val[:, :-1], val[:, -1]
    predicted = model.predict(features)

    val_loss = float(mean_squared_error(target, predicted))
    baseline = float(mean_squared_error(target, np.full_like(target, info["train_target_mean"])))
    metrics = {
        "region": args.region or args.model_dir.name,
        "val_loss": round(val_loss, 3),
        "val_rmse": round(val_loss**0.5, 3),
        "val_mae": round(float(mean_absolute_error(target, predicted)), 3),
        "val_r2": round(float(r2_score(target, predicted)), 4),
        "baseline_val_loss": round(baseline, 3),
        "improvement": round(1 - val_loss / baseline, 4),
        "train_rows": info["train_rows"],
        "val_rows": info["val_rows"],
        "params": info["params"],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(metrics, indent=2) + "\n")
    print(f"{metrics['region']}: val_loss {val_loss:.1f} (baseline {baseline:.1f}), r2 {metrics['val_r2']}")


if __name__ == "__main__":
    main()
