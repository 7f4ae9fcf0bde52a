"""The Plan: the expanded, engine-neutral DAG that every engine takes as its single input.

A Plan is plain data. Per-step constants (resources, placement, attributes) are shared objects so a
plan of 100k+ nodes stays small; per-node values are the node's argv, env, coordinates and paths.

It knows no engine. An engine's own step fields (spec/sections.py) travel in that engine's section of the
step, StepInfo.engine_fields[ENGINE][FIELD], as its top-level block travels in Plan.engine_defaults[ENGINE]:
the plan carries them, opaque; the engine reads them (and checked them, at load), nothing neutral does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

# 2 and 3: the engine fields a step kept at its top moved into their engine's section (2: one, 3: the rest).
# A plan of an earlier format (a run made before) keeps them in the EARLIER_FORMAT section, where the engine
# that owns them finds them (StepInfo.engine_section). Node fingerprints (cache keys) never held them.
PLAN_FORMAT = 3
_READABLE_FORMATS = (1, 2, PLAN_FORMAT)
EARLIER_FORMAT = "earlier-format"

# argv[0] of a node that runs dagflow itself (a transfer step); each engine decides how to launch it
# (the local engine uses the running interpreter, batch engines expect `dagflow` on the execute node).
DAGFLOW_LAUNCHER = "dagflow"

# Steps dagflow adds to a plan: `<step>.publish` uploads a train step's outputs (its `publish:`),
# `<step>.promote` decides an evaluate step's `promote_if:`. The dot keeps them apart from user steps.
PUBLISH_SUFFIX = ".publish"
PROMOTE_SUFFIX = ".promote"

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
    # The engines' own fields, by engine name then field (what each engine's section makes of the step, its
    # declared step fields: spec/sections.py); that engine alone interprets them. Empty for a step that sets none.
    engine_fields: dict[str, dict[str, Any]] = field(default_factory=dict)

    def engine_section(self, engine: str) -> dict[str, Any]:
        """engine's fields of this step, with those a plan of an earlier format kept at the step's top."""
        return {**self.engine_fields.get(EARLIER_FORMAT, {}), **self.engine_fields.get(engine, {})}


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
    # The engines' own blocks as the pipeline file declares them, by engine name; flags override them.
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
            "steps": {name: _plain(step) for name, step in self.steps.items()},
            # nodes hold only plain values; shallow dicts avoid asdict's deep copy (10x slower at 100k nodes)
            "nodes": [{name: getattr(node, name) for name in _NODE_FIELDS} for node in self.nodes.values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Plan:
        if data.get("format") not in _READABLE_FORMATS:
            raise ValueError(f"unsupported plan format {data.get('format')!r}, expected {PLAN_FORMAT}")
        steps = {}
        for name, raw in data["steps"].items():
            raw = _step_of_earlier_format(raw) if data["format"] != PLAN_FORMAT else dict(raw)
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


_STEP_FIELDS = frozenset(f.name for f in fields(StepInfo))


def _step_of_earlier_format(raw: dict[str, Any]) -> dict[str, Any]:
    """A step as an earlier format wrote it, in today's layout: the keys today's steps lack (engine fields it
    kept at the step's top), those it set, in the EARLIER_FORMAT section as they were."""
    earlier = {key: value for key, value in raw.items() if key not in _STEP_FIELDS and value not in (None, {})}
    raw = {key: value for key, value in raw.items() if key in _STEP_FIELDS}
    raw["engine_fields"] = {**raw.get("engine_fields", {}), **({EARLIER_FORMAT: earlier} if earlier else {})}
    return raw


_LEAVES = (str, int, float, bool, type(None))
_FIELDS_OF: dict[type, tuple[str, ...]] = {}


def _plain(value: Any) -> Any:
    """What dataclasses.asdict gives for a step (dataclasses, tuples, lists and dicts of plain values), without
    its deep copy of every leaf: asdict of 6,000 steps was most of writing their plan."""
    kind = type(value)
    if kind in _LEAVES:
        return value
    if kind is list or kind is tuple:
        return kind(_plain(item) for item in value)
    if kind is dict:
        return {key: _plain(item) for key, item in value.items()}
    names = _FIELDS_OF.get(kind)
    if names is None:
        names = _FIELDS_OF[kind] = tuple(f.name for f in fields(value))  # a dataclass (TypeError otherwise)
    return {name: _plain(getattr(value, name)) for name in names}
