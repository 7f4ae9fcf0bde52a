"""A layered left-to-right layout of a plan's DAG, for the report's SVG and the plan's PNG.

Nodes are grouped when there are too many to draw one by one: each step starts with a box per node, and
the step with the most boxes groups its nodes by one axis fewer (its last axis dropped), again and again,
down to one box per step, until there are at most `max_boxes` boxes and no step has more than
MAX_STEP_BOXES: a big step is grouped by its first axes, small steps keep a box per node. Where one box
per step is still too many (a workflow of one-task steps), steps are grouped by their layer and the stem
of their names. Layers are the topological generations of the (grouped) graph; boxes in a layer are
ordered by a few barycenter sweeps to cut edge crossings.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from dagflow.plan.model import Node, Plan

MAX_BOXES = 150
MAX_STEP_BOXES = 50  # a step with more boxes than this is grouped further (one column of the picture)
BOX_HEIGHT = 44
GAP_X = 70
GAP_Y = 14
MARGIN = 16
CHAR_WIDTH = 7.0  # px per character of the 12px sans-serif labels, a little generous
LABEL_PAD = 8  # px between a box's left and right edges and its labels
MIN_BOX_WIDTH = 110
MAX_BOX_WIDTH = 260
SWEEPS = 4


@dataclass(slots=True)
class Box:
    key: str
    step: str
    coords: dict[str, str]  # the matrix values every member shares (all of a node's when ungrouped)
    members: list[str] = field(default_factory=list)  # node names, in plan order
    steps: list[str] = field(default_factory=list)  # the steps its members belong to (one, unless merged)
    layer: int = 0
    x: float = 0.0
    y: float = 0.0

    @property
    def label(self) -> str:
        return self.members[0] if len(self.members) == 1 else self.step

    @property
    def sublabel(self) -> str:
        values = " ".join(f"{axis}={value}" for axis, value in self.coords.items())
        if len(self.members) == 1:
            return values
        if len(self.steps) > 1:
            return f"{len(self.steps)} steps · {len(self.members)} nodes"
        return f"{values} · {len(self.members)} nodes" if values else f"{len(self.members)} nodes"


@dataclass(slots=True)
class DagLayout:
    boxes: list[Box]
    edges: list[tuple[int, int]]  # indexes into boxes: (parent, child)
    box_width: float
    box_height: float
    width: float
    height: float
    grouped: bool  # some box holds more than one node
    nodes: int


def _group_key(step: str, coords: dict[str, str], axes: tuple[str, ...], dropped: int) -> tuple[str, dict[str, str]]:
    kept = axes[: max(0, len(axes) - dropped)]
    shared = {axis: coords[axis] for axis in kept if axis in coords}
    return step + "".join(f"\x1f{axis}={value}" for axis, value in shared.items()), shared


def _step_keys(plan: Plan, nodes: list[Node], dropped: int) -> list[tuple[str, dict[str, str]]]:
    """Each node's box key and shared coordinates with `dropped` of its step's last axes dropped (0: each
    node its own box)."""
    if dropped == 0:
        return [(node.name, dict(node.coords)) for node in nodes]
    axes = plan.steps[nodes[0].step].axes
    return [_group_key(node.step, node.coords, axes, dropped) for node in nodes]


def _step_levels(plan: Plan, by_step: dict[str, list[Node]], max_boxes: int) -> dict[str, int]:
    """How many of its last axes each step drops: the step with the most boxes gives up an axis, again and
    again, until there are at most max_boxes boxes and no step has more than MAX_STEP_BOXES (or no step
    can give up more)."""
    level = dict.fromkeys(by_step, 0)
    count = {step: len(nodes) for step, nodes in by_step.items()}
    most = {step: len(plan.steps[step].axes) + 1 for step in by_step}  # past its axes: one box for the step
    while sum(count.values()) > max_boxes or max(count.values(), default=0) > MAX_STEP_BOXES:
        can = [step for step in by_step if level[step] < most[step] and count[step] > 1]
        if not can:
            break
        step = max(can, key=count.__getitem__)
        level[step] += 1
        count[step] = len({key for key, _ in _step_keys(plan, by_step[step], level[step])})
    return level


def _step_layers(plan: Plan, steps: list[str]) -> dict[str, int]:
    """Each step's topological generation in the graph of steps (a step needs the steps its nodes' parents
    belong to)."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(steps)
    nodes = plan.nodes
    graph.add_edges_from({(nodes[parent].step, node.step) for node in nodes.values() for parent in node.parents})
    return {step: number for number, generation in enumerate(nx.topological_generations(graph)) for step in generation}


def step_stem(step: str) -> str:
    """A step name without its trailing number (mProject_0042: mProject), for grouping one-task steps."""
    return re.sub(r"[\W_]*\d+$", "", step) or step


def _steps_grouped(plan: Plan, steps: list[str], max_boxes: int) -> dict[str, tuple[str, str]]:
    """When one box per step is still too many: each step's group key and label, by its layer in the graph
    of steps and its name's stem, else by runs of layers (a box never holds steps of two layers that
    another box lies between: the grouped graph stays acyclic)."""
    layer = _step_layers(plan, steps)
    keyed = {step: (f"{layer[step]}\x1f{step_stem(step)}", f"{step_stem(step)}*") for step in steps}
    if len({key for key, _ in keyed.values()}) <= max_boxes:
        return keyed
    layers = max(layer.values(), default=0) + 1
    span = -(-layers // max(1, max_boxes))  # layers per box
    grouped: dict[str, tuple[str, str]] = {}
    for step in steps:
        first = layer[step] // span * span
        last = min(layers, first + span) - 1
        grouped[step] = (f"layers\x1f{first}", f"layer {first}" if first == last else f"layers {first}-{last}")
    return grouped


def group_plan(plan: Plan, max_boxes: int = MAX_BOXES) -> tuple[list[Box], dict[str, str]]:
    """Boxes of nodes, at most max_boxes of them: each step at the finest grouping that keeps the whole
    within max_boxes (a big step by its first axes, a bigger one alone), and when one box per step is
    still too many, steps grouped by layer and name."""
    by_step: dict[str, list[Node]] = {}
    for node in plan.nodes.values():
        by_step.setdefault(node.step, []).append(node)
    level = _step_levels(plan, by_step, max_boxes)
    merged = _steps_grouped(plan, list(by_step), max_boxes) if len(by_step) > max_boxes else {}
    key_of: dict[str, tuple[str, str, dict[str, str]]] = {}  # node: its box's key, label and coordinates
    for step, nodes in by_step.items():
        if step in merged:
            key, label = merged[step]
            key_of.update((node.name, (key, label, {})) for node in nodes)
        else:
            keys = _step_keys(plan, nodes, level[step])
            key_of.update((node.name, (key, step, shared)) for node, (key, shared) in zip(nodes, keys, strict=True))
    boxes: dict[str, Box] = {}
    box_of: dict[str, str] = {}
    for node in plan.nodes.values():  # plan order: the starting order within a layer
        key, label, shared = key_of[node.name]
        box = boxes.get(key)
        if box is None:
            box = boxes[key] = Box(key, label, shared)
        box.members.append(node.name)
        if node.step not in box.steps:
            box.steps.append(node.step)
        box_of[node.name] = key
    return list(boxes.values()), box_of


def _generations(count: int, edges: list[tuple[int, int]]) -> list[int]:
    """Each box's topological generation: its layer, 0 for boxes without parents."""
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(range(count))
    graph.add_edges_from(edges)
    layer = [0] * count
    for number, generation in enumerate(nx.topological_generations(graph)):
        for index in generation:
            layer[index] = number
    return layer


def _order_layers(columns: list[list[int]], edges: list[tuple[int, int]], count: int) -> None:
    """Barycenter sweeps: each box moves toward the mean position of its neighbours in the next layer."""
    parents: list[list[int]] = [[] for _ in range(count)]
    children: list[list[int]] = [[] for _ in range(count)]
    for parent, child in edges:
        parents[child].append(parent)
        children[parent].append(child)
    position = [0.0] * count
    for column in columns:
        for rank, index in enumerate(column):
            position[index] = rank
    for sweep in range(SWEEPS):
        downward = sweep % 2 == 0
        sequence = columns[1:] if downward else columns[-2::-1]
        for column in sequence:
            neighbours = parents if downward else children
            def weight(index: int, neighbours: list[list[int]] = neighbours) -> tuple[float, float]:
                linked = neighbours[index]
                mean = sum(position[n] for n in linked) / len(linked) if linked else position[index]
                return mean, position[index]

            column.sort(key=weight)
            for rank, index in enumerate(column):
                position[index] = rank


def estimated_label_width(box: Box) -> float:
    """px the wider of a box's two labels takes, estimated from its length (for a browser's font, which
    this side cannot measure)."""
    return max(len(box.label), len(box.sublabel)) * CHAR_WIDTH


def layout_plan(
    plan: Plan, max_boxes: int = MAX_BOXES, label_width: Callable[[Box], float] = estimated_label_width
) -> DagLayout:
    """label_width: px the wider of a box's labels takes; boxes are made wide enough for the widest (up to
    MAX_BOX_WIDTH)."""
    boxes, box_of = group_plan(plan, max_boxes)
    index_of = {box.key: index for index, box in enumerate(boxes)}
    edges = sorted(
        {
            (index_of[box_of[parent]], index_of[box_of[child]])
            for parent, child in plan.edges()
            if box_of[parent] != box_of[child]
        }
    )
    layer = _generations(len(boxes), edges)
    columns: list[list[int]] = [[] for _ in range(max(layer, default=-1) + 1)]
    for index in range(len(boxes)):  # plan order is the starting order within a layer
        columns[layer[index]].append(index)
    _order_layers(columns, edges, len(boxes))

    widest = max((label_width(box) for box in boxes), default=0.0)
    box_width = min(MAX_BOX_WIDTH, max(MIN_BOX_WIDTH, widest + 2 * LABEL_PAD))
    tallest = max((len(column) for column in columns), default=0)
    height = 2 * MARGIN + tallest * BOX_HEIGHT + max(0, tallest - 1) * GAP_Y
    for number, column in enumerate(columns):
        used = len(column) * BOX_HEIGHT + max(0, len(column) - 1) * GAP_Y
        top = (height - used) / 2  # centre each column
        for rank, index in enumerate(column):
            box = boxes[index]
            box.layer = number
            box.x = MARGIN + number * (box_width + GAP_X)
            box.y = top + rank * (BOX_HEIGHT + GAP_Y)
    width = 2 * MARGIN + len(columns) * box_width + max(0, len(columns) - 1) * GAP_X
    return DagLayout(
        boxes=boxes,
        edges=edges,
        box_width=box_width,
        box_height=BOX_HEIGHT,
        width=width,
        height=height,
        grouped=any(len(box.members) > 1 for box in boxes),
        nodes=len(plan.nodes),
    )
