"""Compare the regions: gather every models/<region>/metrics.json into report.md and report.json.

Usage, from this directory:

    python report.py models --out reports
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

COLUMNS = ("region", "val_loss", "val_rmse", "val_mae", "val_r2", "baseline_val_loss", "improvement")


def collect(models: Path, regions: list[str] | None) -> list[dict[str, Any]]:
    if regions:
        paths = [models / region / "metrics.json" for region in regions]
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            raise SystemExit(f"error: missing metrics: {', '.join(missing)}")
    else:
        paths = sorted(models.glob("*/metrics.json"))
        if not paths:
            raise SystemExit(f"error: no {models}/*/metrics.json found")
    return [json.loads(path.read_text()) for path in paths]


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ranked = sorted(rows, key=lambda row: row["val_loss"])
    total_val = sum(row["val_rows"] for row in rows)
    return {
        "regions": len(rows),
        "best_region": ranked[0]["region"],
        "worst_region": ranked[-1]["region"],
        "weighted_val_loss": round(sum(r["val_loss"] * r["val_rows"] for r in rows) / total_val, 3),
        "all_beat_baseline": all(row["val_loss"] < row["baseline_val_loss"] for row in rows),
    }


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any]) -> str:
    lines = [
        "# Per-region retraining report",
        "",
        f"{summary['regions']} regions; best **{summary['best_region']}**, worst "
        f"**{summary['worst_region']}**; validation-weighted val_loss {summary['weighted_val_loss']}; "
        f"every region beats its mean-predictor baseline: {'yes' if summary['all_beat_baseline'] else 'no'}.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if column == "region" else "---:" for column in COLUMNS) + "|",
    ]
    for row in sorted(rows, key=lambda row: row["val_loss"]):
        lines.append("| " + " | ".join(str(row[column]) for column in COLUMNS) + " |")
    lines += ["", "val_loss is the validation mean squared error; improvement = 1 - val_loss / baseline."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("models", type=Path, help="directory holding <region>/metrics.json")
    parser.add_argument("--out", type=Path, required=True, help="directory for report.md and report.json")
    parser.add_argument("--regions", default="", help="comma-separated regions (default: every one found)")
    args = parser.parse_args()

    rows = collect(args.models, [name for name in args.regions.split(",") if name])
    summary = summarise(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.json").write_text(json.dumps({"summary": summary, "regions": rows}, indent=2) + "\n")
    (args.out / "report.md").write_text(markdown(rows, summary))
    print(f"report for {len(rows)} regions: best {summary['best_region']}, worst {summary['worst_region']}")


if __name__ == "__main__":
    main()
