"""The Plan: the expanded, engine-neutral DAG that every engine takes as its single input.

A Plan is plain data. Per-step constants (resources, placement, attributes) are shared objects so a
plan of 100k+ nodes stays small; per-node values are the node's argv, env, coordinates and paths.

It knows no engine. A step field only one engine reads (HTCondor's ClassAd `requirements`) travels in
that engine's own section of the step, StepInfo.engine_fields[ENGINE][FIELD], as the pipeline-level
`condor:` settings travel in Plan.engine_defaults[ENGINE]: the plan carries them, the engine reads and
checks them (its declared spec check), and nothing neutral interprets them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from dagflow.spec.engine_fields import ENGINE_OWNED

# 2: a step's `requirements` moved into its engine section (engine_fields["condor"]); format 1 plans (runs made
# before) are read and moved the same way. Node fingerprints (cache keys) never held requirements: unchanged.
PLAN_FORMAT = 2
_READABLE_FORMATS = (1, PLAN_FORMAT)

# argv[0] of a node that runs dagflow itself (a transfer step); each engine decides how to launch it
# (the local engine uses the running interpreter, batch engines expect `dagflow` on the execute node).
DAGFLOW_LAUNCHER = "dagflow"

# Steps dagflow adds to a plan: `<step>.publish` uploads a train step's outputs (its `publish:`),
# `<step>.promote` decides an evaluate step's `promote_if:`. The dot keeps them apart from user steps.
PUBLISH_SUFFIX = ".publish"
PROMOTE_SUFFIX = ".promote"

ClassAdValue = str | int | float | bool
# The command words runtime.python replaces (the one rule, for every engine that honours it).
PYTHON_NAMES = frozenset({"python", "python3"})


@dataclass(frozen=True, slots=True)
class Resources:
    cpus: int = 1
    memory_mb: int = 1024
    disk_mb: int = 1024
    gpus: int = 0
    gpu_memory_mb: int | None = None
    cuda_capability: float | None = None
    # Memory growth: a node killed or held for exceeding memory_mb runs again with memory_mb x
    # memory_growth (and again, up to memory_max_mb). None: no growth, and locally no enforcement.
    memory_max_mb: int | None = None
    memory_growth: float = 2.0


@dataclass(frozen=True, slots=True)
class Runtime:
    """What runs a step's nodes on an execute node (the step's `runtime:` over the pipeline's)."""

    python: str | None = None  # the interpreter `python` means there; None: the submitter's
    container_image: str | None = None

    def argv(self, argv: list[str]) -> list[str]:
        """A node's argv with a leading `python`/`python3` meaning runtime.python, where it is set."""
        if self.python and argv and argv[0] in PYTHON_NAMES:
            return [self.python, *argv[1:]]
        return argv


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What every node of one step shares."""

    name: str
    kind: str  # transfer | train | evaluate | command
    axes: tuple[str, ...]  # the matrix axes this step fans out over, in matrix order
    resources: Resources
    # Attributes every node of the step publishes about itself (the pipeline's `classads:`). Neutral, not an
    # engine's section: every engine that can attach attributes to a job does (condor as job ClassAd
    # attributes, Slurm and Grid Engine in the batch job's attribute record, engines/batch/submission.py),
    # and reports show them whatever engine ran the step, so they are part of what a step is, not of how one
    # engine places it. Their names and values are checked in the spec (spec/validate.py) for every engine.
    classads: dict[str, ClassAdValue]
    retries: int
    retry_unless_exit: tuple[int, ...]
    timeout_s: int | None
    priority: int
    metrics: str | None
    # Where `auto` resources came from: field -> "2304 MB: p95 of 12 samples in 3 runs + 20%" (or the fallback)
    resource_notes: dict[str, str] = field(default_factory=dict)
    # Self-checkpointing (the step's `checkpoint:`): an exit with this code means "checkpoint written, run
    # me again", not a failure. Files as written (templates); each node holds its own rendered ones.
    checkpoint_exit_code: int | None = None
    checkpoint_files: tuple[str, ...] = ()
    checkpoint_max_restarts: int = 0  # restarts of one node after which a checkpoint exit is a failure
    runtime: Runtime = Runtime()
    # Fields only one engine reads, by engine name then field (spec/engine_fields.py ENGINE_OWNED says which),
    # e.g. {"condor": {"requirements": ["HAS_A100", "CUDACapability >= 8.0"]}}: that engine alone interprets
    # them. Empty for a step that sets none.
    engine_fields: dict[str, dict[str, Any]] = field(default_factory=dict)


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
    checkpoint_files: list[str] = field(default_factory=list)  # rendered from StepInfo.checkpoint_files


_NODE_FIELDS = tuple(f.name for f in fields(Node))


@dataclass(slots=True)
class Plan:
    pipeline: str
    run_id: str
    source: str  # path of the pipeline file the plan came from
    steps: dict[str, StepInfo]
    nodes: dict[str, Node]  # in a topological order
    workdir: str = "."  # directory the nodes' relative paths are relative to
    # Engine settings the pipeline file declares (its `condor:` block), by engine name; flags override them.
    engine_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What the command line changed (plan/overrides.py): {"only": {axis: [values]}, "set": {param: value}}
    overrides: dict[str, Any] = field(default_factory=dict)
    # Steps whose metrics lines a reader follows while their nodes run (a search's objective step under
    # early_stopping): an engine without a shared filesystem streams those nodes' lines back as they are
    # written (Capabilities.streams_progress). Written to plan.json only when there are some.
    progress_steps: list[str] = field(default_factory=list)

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
        data = self._to_dict()
        if self.progress_steps:
            data["progress_steps"] = list(self.progress_steps)
        return data

    def _to_dict(self) -> dict[str, Any]:
        return {
            "format": PLAN_FORMAT,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "source": self.source,
            "workdir": self.workdir,
            "engine_defaults": self.engine_defaults,
            "overrides": self.overrides,
            "steps": {name: asdict(step) for name, step in self.steps.items()},
            # nodes hold only plain values; shallow dicts avoid asdict's deep copy (10x slower at 100k nodes)
            "nodes": [{name: getattr(node, name) for name in _NODE_FIELDS} for node in self.nodes.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if data.get("format") not in _READABLE_FORMATS:
            raise ValueError(f"unsupported plan format {data.get('format')!r}, expected {PLAN_FORMAT}")
        steps = {}
        for name, raw in data["steps"].items():
            raw = _step_of_format_1(raw) if data["format"] == 1 else dict(raw)
            raw["resources"] = Resources(**raw["resources"])
            raw["axes"] = tuple(raw["axes"])
            raw["retry_unless_exit"] = tuple(raw["retry_unless_exit"])
            raw["checkpoint_files"] = tuple(raw.get("checkpoint_files", ()))
            raw["runtime"] = Runtime(**raw.get("runtime", {}))
            steps[name] = StepInfo(**raw)
        nodes = {raw["name"]: Node(**raw) for raw in data["nodes"]}
        return cls(
            pipeline=data["pipeline"],
            run_id=data["run_id"],
            source=data["source"],
            steps=steps,
            nodes=nodes,
            workdir=data.get("workdir", "."),
            engine_defaults=data.get("engine_defaults", {}),
            overrides=data.get("overrides", {}),
            progress_steps=list(data.get("progress_steps", [])),
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


def _step_of_format_1(raw: dict[str, Any]) -> dict[str, Any]:
    """A step as format 1 wrote it, in today's layout: its ClassAd `requirements` (one expression, already
    joined) moved into the condor section, where format 2 keeps the expressions that must all hold."""
    raw = dict(raw)
    requirements = raw.pop("requirements", None)
    raw["engine_fields"] = {ENGINE_OWNED["requirements"]: {"requirements": [requirements]}} if requirements else {}
    return raw
