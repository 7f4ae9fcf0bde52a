"""Promotion verdicts, part of the run directory: `dagflow promote` writes one per promotion node to
$DAGFLOW_RUN_DIR/promotions/<node>.json; the run summary and the report read them and say per matrix cell
(per region): promoted, kept, or failed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json, read_bounded
from dagflow.files import file_stem, write_atomic
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.plan.model import PROMOTE_SUFFIX

PROMOTIONS_DIR = "promotions"


@dataclass(slots=True)
class Verdict:
    node: str
    verdict: str  # promoted | kept | failed
    reason: str
    metric: str
    better: str
    new: float | None = None
    old: float | None = None
    model: str | None = None
    pointer: str | None = None
    run_id: str | None = None


def verdict_path(run_dir: Path, node: str) -> Path:
    return run_dir / PROMOTIONS_DIR / f"{file_stem(node)}.json"


def write_verdict(run_dir: Path, verdict: Verdict) -> Path:
    path = verdict_path(run_dir, verdict.node)
    write_atomic(path, (json.dumps(asdict(verdict), indent=1) + "\n").encode("utf-8"))
    return path


def read_verdict(run_dir: Path, node: str) -> dict[str, Any] | None:
    try:
        data = loads_json(read_bounded(verdict_path(run_dir, node)))
    except (OSError, BoundedInputError):
        return None
    return data if isinstance(data, dict) else None


def promotion_nodes(planned: Plan | PlanIndex) -> list[tuple[str, dict[str, str]]]:
    """(node, coords) of the plan's promotion nodes, in plan order."""
    if isinstance(planned, Plan):
        return [(node.name, node.coords) for node in planned.nodes.values() if node.step.endswith(PROMOTE_SUFFIX)]
    promote = {position for position, step in enumerate(planned.steps) if step.endswith(PROMOTE_SUFFIX)}
    if not promote:
        return []
    return [
        (name, planned.coords(at)) for at, (name, step) in enumerate(zip(planned.names, planned.step_of, strict=True))
        if step in promote
    ]  # fmt: skip


def _promote_nodes(run_dir: Path, states: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    """(node, coords) of the run's promotion nodes, from its plan; none when it has none."""
    if not any(PROMOTE_SUFFIX in name for name in states):  # the common case: no plan to read
        return []
    try:
        plan = Plan.from_json((run_dir / "plan.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return promotion_nodes(plan)


def promotion_records(
    run_dir: Path, states: dict[str, str], nodes: list[tuple[str, dict[str, str]]] | None = None
) -> list[dict[str, Any]]:
    """One record per promotion node: its verdict, or failed/undecided when it has none. nodes: the run's
    promotion nodes (promotion_nodes), where the caller has its plan; else read from plan.json."""
    records = []
    for node, coords in _promote_nodes(run_dir, states) if nodes is None else nodes:
        state = states.get(node, "pending")
        verdict = read_verdict(run_dir, node) if state in ("succeeded", "failed") else None
        label = "/".join(coords.values()) or node.split(".")[0]
        if verdict is not None:
            records.append({"label": label, **verdict})
        elif state in ("failed", "upstream_failed"):
            why = "a node it needs failed" if state == "upstream_failed" else "the promotion step failed"
            records.append({"label": label, "node": node, "verdict": "failed", "reason": why})
        else:
            records.append({"label": label, "node": node, "verdict": "undecided", "reason": state.replace("_", "-")})
    return records


def promotion_lines(records: list[dict[str, Any]]) -> list[str]:
    """The run summary's and `dagflow status`'s lines of promotion_records()."""
    if not records:
        return []
    width = max(len(record["label"]) for record in records)
    lines = ["promotions:"]
    for record in records:
        lines.append(f"  {record['label']:<{width}}  {record['verdict']}: {record['reason']}")
    return lines
