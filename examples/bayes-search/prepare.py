"""Split one of scikit-learn's bundled data sets into train and validation arrays (seeded).

    python prepare.py --dataset wine --out data/wine.npz
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from sklearn import datasets
from sklearn.model_selection import train_test_split

LOADERS = {"wine": datasets.load_wine, "breast_cancer": datasets.load_breast_cancer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--dataset", choices=sorted(LOADERS), required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    x, y = LOADERS[args.dataset](return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.3, random_state=args.seed, stratify=y)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    # Trials running at once may both prepare before the cache knows the result: write atomically.
    partial = args.out.with_name(f".{args.out.name}.{os.getpid()}.npz")
    np.savez(partial, x_train=x_train, x_val=x_val, y_train=y_train, y_val=y_val)
    os.replace(partial, args.out)
    print(f"{args.dataset}: {len(y_train)} train, {len(y_val)} validation rows -> {args.out}")


if __name__ == "__main__":
    main()
