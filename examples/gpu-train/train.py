"""Train a region's PyTorch regression network on the GPU it was given, one epoch per run.

    python train.py --data data/us --epochs 6 --lr 0.01 --gpu-memory-mb 40960 --ckpt checkpoints/us --out models/us

Each run resumes from `<ckpt>/state.pt` (written to a temporary name and renamed, so an eviction mid-write
leaves the previous one whole), trains one epoch, writes the new checkpoint and exits 85 ("checkpoint
written, run me again": the step's checkpoint.exit_code) until the last epoch, after which it writes
`<out>/model.pt` and `<out>/metrics.json` (val_loss, train_loss, the device, the batch size) and exits 0.
The batch size follows the GPU's memory (--gpu-memory-mb, which dagflow fills from {gpu.memory_mb}).
Without CUDA it trains on the CPU and says so; without PyTorch it exits 2 saying how to install it.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
from pathlib import Path
from typing import Any

CHECKPOINT_EXIT = 85
USAGE_EXIT = 2


def batch_size(gpu_memory_mb: int) -> int:
    """A batch that uses a small fraction of the GPU: 1,024 rows per 8 GB, between 256 and 16,384."""
    return max(256, min(16384, gpu_memory_mb // 8))


def load(path: Path) -> tuple[Any, Any]:
    """Features and targets of a CSV file, as torch tensors (torch is imported only where it is used)."""
    import torch

    with open(path, newline="") as handle:
        rows = [[float(value) for value in row] for row in list(csv.reader(handle))[1:]]
    data = torch.tensor(rows, dtype=torch.float32)
    return data[:, :-1], data[:, -1:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--gpu-memory-mb", type=int, default=8192)
    parser.add_argument("--ckpt", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("train.py needs PyTorch: pip install -e '.[gpu]' (or pip install torch)", file=sys.stderr)
        return USAGE_EXIT

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        print("no CUDA device visible: training on the CPU", file=sys.stderr)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)
    ).to(device)
    optimiser = torch.optim.Adam(model.parameters(), lr=args.lr)
    state_path = args.ckpt / "state.pt"
    epoch = 0
    if state_path.exists():
        state = torch.load(state_path, map_location=device)
        model.load_state_dict(state["model"])
        optimiser.load_state_dict(state["optimiser"])
        epoch = state["epoch"]
    train_x, train_y = (tensor.to(device) for tensor in load(args.data / "train.csv"))
    val_x, val_y = (tensor.to(device) for tensor in load(args.data / "val.csv"))
    size = batch_size(args.gpu_memory_mb)
    loss_fn = torch.nn.MSELoss()
    model.train()
    order = torch.randperm(len(train_x), device=device, generator=None)
    total = 0.0
    for start in range(0, len(train_x), size):
        batch = order[start : start + size]
        optimiser.zero_grad()
        loss = loss_fn(model(train_x[batch]), train_y[batch])
        loss.backward()
        optimiser.step()
        total += float(loss) * len(batch)
    epoch += 1
    model.eval()
    with torch.no_grad():
        val_loss = float(loss_fn(model(val_x), val_y))
    print(f"epoch {epoch}/{args.epochs}: train_loss {total / len(train_x):.5f} val_loss {val_loss:.5f} on {device}")
    args.ckpt.mkdir(parents=True, exist_ok=True)
    partial = state_path.with_name("state.pt.partial")
    torch.save({"model": model.state_dict(), "optimiser": optimiser.state_dict(), "epoch": epoch}, partial)
    os.replace(partial, state_path)
    if epoch < args.epochs:
        return CHECKPOINT_EXIT
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out / "model.pt")
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    metrics = {
        "val_loss": val_loss, "train_loss": total / len(train_x), "epochs": epoch,
        "device": device.type, "gpu": gpu, "batch_size": size,
    }  # fmt: skip
    (args.out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
