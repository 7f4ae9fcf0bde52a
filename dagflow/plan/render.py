"""Ways to show a Plan: a rich table, JSON, and Graphviz DOT."""

from __future__ import annotations

import json
from collections.abc import Iterator

from rich.table import Table

from dagflow.console import FittedTable
from dagflow.plan.graph import depth
from dagflow.plan.model import Plan, Resources


def resources_text(resources: Resources) -> str:
    parts = [f"{resources.cpus} cpu", f"{resources.memory_mb} MB"]
    if resources.gpus:
        gpu = f"{resources.gpus} gpu"
        if resources.gpu_memory_mb:
            gpu += f" ≥{resources.gpu_memory_mb} MB"
        if resources.cuda_capability:
            gpu += f" cc≥{resources.cuda_capability}"
        parts.append(gpu)
    return ", ".join(parts)


def summary(plan: Plan) -> str:
    edges = sum(len(node.parents) for node in plan.nodes.values())
    return (
        f"{plan.pipeline} (run {plan.run_id}): {len(plan.nodes)} nodes, {edges} edges, "
        f"{len(plan.steps)} steps, {depth(plan)} layers"
    )


def table(plan: Plan, limit: int | None = None) -> FittedTable:
    out = Table(title=summary(plan), title_justify="left")
    for column in ("node", "step", "coordinates", "resources", "needs"):
        out.add_column(column)
    for index, node in enumerate(plan.nodes.values()):
        if limit is not None and index >= limit:
            out.caption = f"… {len(plan.nodes) - limit} more nodes (use --limit 0 for all, or --json)"
            break
        parents = ", ".join(node.parents[:4]) + (f", … ({len(node.parents)})" if len(node.parents) > 4 else "")
        coords = " ".join(f"{axis}={value}" for axis, value in node.coords.items())
        out.add_row(node.name, node.step, coords, resources_text(plan.step_of(node).resources), parents)
    return FittedTable(out, keep=("node",))


def to_json(plan: Plan) -> str:
    return json.dumps(plan.to_dict(), indent=2)


def to_dot(plan: Plan) -> Iterator[str]:
    # pipeline, step and node names and matrix values are restricted to [A-Za-z0-9._-] by validation,
    # so they need no escaping inside DOT's double-quoted IDs
    yield f'digraph "{plan.pipeline}" {{'
    yield "  rankdir=LR;"
    yield "  node [shape=box, style=rounded];"
    for node in plan.nodes.values():
        label = node.step + "".join(f"\\n{axis}={value}" for axis, value in node.coords.items())
        yield f'  "{node.name}" [label="{label}"];'
    for parent, child in plan.edges():
        yield f'  "{parent}" -> "{child}";'
    yield "}"
