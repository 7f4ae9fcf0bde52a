"""Score a fitted model on the validation split: log loss (what the search minimises) and accuracy.

    python evaluate.py --data data/wine.npz --model out/RUN/wine/model.pkl --out out/RUN/wine/metrics.json
"""

from __future__ import annotations

import argparse
import json
import pickle
from pathlib import Path

import numpy as np
from sklearn.metrics import accuracy_score, log_loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    data = np.load(args.data)
    model = pickle.loads(args.model.read_bytes())
    probabilities = model.predict_proba(data["x_val"])
    metrics = {
        "val_loss": float(log_loss(data["y_val"], probabilities, labels=model.classes_)),
        "val_accuracy": float(accuracy_score(data["y_val"], model.classes_[probabilities.argmax(axis=1)])),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(metrics, indent=2) + "\n")
    print(json.dumps(metrics))


if __name__ == "__main__":
    main()
