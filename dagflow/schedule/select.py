"""One matrix value's share of a plan, for per-value schedules (`schedule: {per: region}`)."""

from __future__ import annotations

from dagflow.errors import DagflowError
from dagflow.plan import Plan


def select(plan: Plan, axis: str, value: str) -> Plan:
    """The nodes whose coordinate on axis is value. Nodes that gather over the axis need every value,
    so they (and what depends on them) are left out."""
    kept = {}
    for name, node in plan.nodes.items():  # in topological order: parents are decided first
        if node.coords.get(axis) == value and all(parent in kept for parent in node.parents):
            kept[name] = node
    if not kept:
        raise DagflowError(f"no node of pipeline {plan.pipeline} has {axis}={value}")
    plan.nodes = kept
    return plan
