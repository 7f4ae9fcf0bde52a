"""Fit a standardised RBF SVM with the given C and gamma on the training split.

    python train.py --data data/wine.npz --C 1.0 --gamma 0.01 --out out/RUN/wine/model.pkl
"""

from __future__ import annotations

import argparse
import pickle
from pathlib import Path

import numpy as np
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--C", type=float, required=True)
    parser.add_argument("--gamma", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if args.C <= 0 or args.gamma <= 0:
        parser.error("--C and --gamma must be positive")
    data = np.load(args.data)
    model = make_pipeline(StandardScaler(), SVC(C=args.C, gamma=args.gamma, probability=True, random_state=0))
    model.fit(data["x_train"], data["y_train"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(pickle.dumps(model))
    print(f"fitted C={args.C:.4g} gamma={args.gamma:.4g} -> {args.out}")


if __name__ == "__main__":
    main()
