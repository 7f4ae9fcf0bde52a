"""Graph views of a Plan: its check (check_plan, which every engine runs before it starts) and its
depth, for summaries."""

from __future__ import annotations

from dagflow.errors import DagflowError
from dagflow.plan.model import Plan


class PlanError(DagflowError):
    pass


def check_plan(plan: Plan) -> None:
    """Every parent exists and comes earlier in plan order (nodes are stored topologically)."""
    seen: set[str] = set()
    for name, node in plan.nodes.items():
        if node.step not in plan.steps:
            raise PlanError(f"plan node {name} names unknown step {node.step!r}")
        for parent in node.parents:
            if parent not in seen:
                problem = "an unknown node" if parent not in plan.nodes else "a node that comes later (a cycle?)"
                raise PlanError(f"plan node {name} has parent {parent}, {problem}")
        seen.add(name)


def depth(plan: Plan) -> int:
    """Number of layers: the longest chain of nodes. Plan.nodes is already in topological order."""
    level: dict[str, int] = {}
    for node in plan.nodes.values():
        level[node.name] = 1 + max((level[parent] for parent in node.parents), default=0)
    return max(level.values(), default=0)
