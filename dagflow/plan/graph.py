"""Graph views of a Plan (networkx): layers and the critical path, for summaries and engines."""

from __future__ import annotations

import networkx as nx

from dagflow.plan.model import Plan


def to_networkx(plan: Plan) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(plan.nodes)
    graph.add_edges_from(plan.edges())
    return graph


def depth(plan: Plan) -> int:
    """Number of layers: the longest chain of nodes. Plan.nodes is already in topological order."""
    level: dict[str, int] = {}
    for node in plan.nodes.values():
        level[node.name] = 1 + max((level[parent] for parent in node.parents), default=0)
    return max(level.values(), default=0)


def critical_path(plan: Plan) -> list[str]:
    return list(nx.dag_longest_path(to_networkx(plan)))
