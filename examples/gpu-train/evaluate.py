"""Gate a region's trained model: copy its validation loss into the metrics file `promote_if` reads.

    python evaluate.py --model models/us --out models/us/eval.json

A model whose training did not reach a finite validation loss fails here (exit 1), so it is never promoted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args()
    metrics = json.loads((args.model / "metrics.json").read_text())
    val_loss = metrics.get("val_loss")
    if not isinstance(val_loss, (int, float)) or not math.isfinite(val_loss):
        print(f"{args.model}/metrics.json: val_loss is {val_loss!r}, not a finite number", file=sys.stderr)
        return 1
    verdict = {"val_loss": val_loss, "epochs": metrics.get("epochs"), "device": metrics.get("device")}
    args.out.write_text(json.dumps(verdict, indent=2) + "\n")
    print(f"{args.model}: val_loss {val_loss:.5f} on {metrics.get('device')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
