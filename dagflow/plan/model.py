"""The Plan: the expanded, engine-neutral DAG that every engine takes as its single input.

A Plan is plain data. Per-step constants (resources, placement, ClassAds) are shared objects so a
plan of 100k+ nodes stays small; per-node values are the node's argv, env, coordinates and paths.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

PLAN_FORMAT = 1

# argv[0] of a node that runs dagflow itself (a transfer step); each engine decides how to launch it
# (the local engine uses the running interpreter, batch engines expect `dagflow` on the execute node).
DAGFLOW_LAUNCHER = "dagflow"

# Steps dagflow adds to a plan: `<step>.publish` uploads a train step's outputs (its `publish:`),
# `<step>.promote` decides an evaluate step's `promote_if:`. The dot keeps them apart from user steps.
PUBLISH_SUFFIX = ".publish"
PROMOTE_SUFFIX = ".promote"

ClassAdValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class Resources:
    cpus: int = 1
    memory_mb: int = 1024
    disk_mb: int = 1024
    gpus: int = 0
    gpu_memory_mb: int | None = None
    cuda_capability: float | None = None


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What every node of one step shares."""

    name: str
    kind: str  # transfer | train | evaluate | command
    axes: tuple[str, ...]  # the matrix axes this step fans out over, in matrix order
    resources: Resources
    # ClassAd expression the machine must satisfy, beyond the resource requests: the GPU placement
    # class and the user's own expression, already parsed and normalised. None when unconstrained.
    requirements: str | None
    classads: dict[str, ClassAdValue]
    retries: int
    retry_unless_exit: tuple[int, ...]
    timeout_s: int | None
    priority: int
    metrics: str | None


@dataclass(slots=True)
class Node:
    name: str  # unique in the plan; safe as a DAGMan node name and as a file name
    step: str
    argv: list[str]
    env: dict[str, str]
    coords: dict[str, str]  # matrix coordinates, e.g. {"region": "us"}
    parents: list[str] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    trial: int | None = None
    params: dict[str, Any] = field(default_factory=dict)
    metrics: str | None = None  # the metrics file this node writes, rendered from StepInfo.metrics


_NODE_FIELDS = tuple(f.name for f in fields(Node))


@dataclass(slots=True)
class Plan:
    pipeline: str
    run_id: str
    source: str  # path of the pipeline file the plan came from
    steps: dict[str, StepInfo]
    nodes: dict[str, Node]  # in a topological order
    workdir: str = "."  # directory the nodes' relative paths are relative to

    def step_of(self, node: Node) -> StepInfo:
        return self.steps[node.step]

    def edges(self) -> Iterator[tuple[str, str]]:
        """(parent, child) pairs."""
        for node in self.nodes.values():
            for parent in node.parents:
                yield parent, node.name

    def children(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {name: [] for name in self.nodes}
        for parent, child in self.edges():
            out[parent].append(child)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "source": self.source,
            "workdir": self.workdir,
            "steps": {name: asdict(step) for name, step in self.steps.items()},
            # nodes hold only plain values; shallow dicts avoid asdict's deep copy (10x slower at 100k nodes)
            "nodes": [{name: getattr(node, name) for name in _NODE_FIELDS} for node in self.nodes.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if data.get("format") != PLAN_FORMAT:
            raise ValueError(f"unsupported plan format {data.get('format')!r}, expected {PLAN_FORMAT}")
        steps = {}
        for name, raw in data["steps"].items():
            raw = dict(raw)
            raw["resources"] = Resources(**raw["resources"])
            raw["axes"] = tuple(raw["axes"])
            raw["retry_unless_exit"] = tuple(raw["retry_unless_exit"])
            steps[name] = StepInfo(**raw)
        nodes = {raw["name"]: Node(**raw) for raw in data["nodes"]}
        return cls(
            pipeline=data["pipeline"],
            run_id=data["run_id"],
            source=data["source"],
            steps=steps,
            nodes=nodes,
            workdir=data.get("workdir", "."),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls.from_dict(json.loads(text))

    def node_fingerprint(self, node: Node) -> str:
        """Hash of everything about a node that decides what it computes (not where or when).

        Engines use it for caching; it excludes the run id only where the node does not use it.
        """
        step = self.steps[node.step]
        payload = json.dumps(
            [node.argv, sorted(node.env.items()), node.params, step.kind, node.inputs, node.outputs],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()
