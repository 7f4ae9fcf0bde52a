"""Spot-tolerant training: one epoch per run, a checkpoint after each, exit 85 until the last epoch.

    python train.py --region us --epochs 8 --ckpt checkpoints/us --out models/us

Each run resumes from `<ckpt>/state.json` (written atomically, so an eviction mid-write leaves the
previous one whole; a finished or differently configured run's checkpoint is not resumed), trains one
epoch of a small linear model on this region's synthetic data, writes the new state and appends the epoch
to `<ckpt>/epochs.log`, then exits 85 ("checkpoint written, run me again") or, after the last epoch,
writes the model and its metrics and exits 0. dagflow (or HTCondor) reruns it on 85, so an eviction costs
at most the epoch it interrupted. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

CHECKPOINT_EXIT = 85  # the step's checkpoint.exit_code


def dataset(region: str, rows: int = 400) -> list[tuple[float, float]]:
    """y = 3x + 1 + noise, a different slice of noise per region (deterministic)."""
    rng = random.Random(f"spot-training-{region}")
    return [(x, 3 * x + 1 + rng.gauss(0, 0.1)) for x in (rng.uniform(-1, 1) for _ in range(rows))]


def write_atomically(path: Path, text: str) -> None:
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


def loss(weights: dict[str, float], data: list[tuple[float, float]]) -> float:
    return sum((weights["w"] * x + weights["b"] - y) ** 2 for x, y in data) / len(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", required=True)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--epoch-seconds", type=float, default=0.2, help="stand-in for a long epoch")
    parser.add_argument("--ckpt", type=Path, required=True, help="checkpoint directory")
    parser.add_argument("--out", type=Path, required=True, help="model directory")
    args = parser.parse_args()

    args.ckpt.mkdir(parents=True, exist_ok=True)
    state_path = args.ckpt / "state.json"
    log = args.ckpt / "epochs.log"
    state = json.loads(state_path.read_text()) if state_path.exists() else None
    if state is None or state["epoch"] >= args.epochs or state["lr"] != args.lr:
        # no checkpoint, or one a finished or differently configured run left: start from scratch
        state = {"epoch": 0, "w": 0.0, "b": 0.0, "lr": args.lr}
        log.unlink(missing_ok=True)
    data = dataset(args.region)
    epoch = state["epoch"] + 1
    weights = {"w": state["w"], "b": state["b"]}
    for x, y in data:  # one epoch of stochastic gradient descent
        error = weights["w"] * x + weights["b"] - y
        weights["w"] -= args.lr * error * x
        weights["b"] -= args.lr * error
    time.sleep(args.epoch_seconds)

    write_atomically(log, (log.read_text() if log.exists() else "") + f"{epoch}\n")
    write_atomically(state_path, json.dumps({"epoch": epoch, "lr": args.lr, **weights}))
    print(f"{args.region}: epoch {epoch}/{args.epochs} loss {loss(weights, data):.5f}", flush=True)
    if epoch < args.epochs:
        return CHECKPOINT_EXIT
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomically(args.out / "model.json", json.dumps(weights))
    metrics = {"region": args.region, "epochs": epoch, "train_loss": loss(weights, data)}
    write_atomically(args.out / "metrics.json", json.dumps(metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
