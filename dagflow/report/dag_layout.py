"""A layered left-to-right layout of a plan's DAG, for the report's SVG and the plan's PNG.

Nodes are grouped when there are too many to draw one by one: first by step and all matrix values
(every node its own box), then dropping the step's last axis, and so on, down to one box per step,
stopping at the first level with at most `max_boxes` boxes. Layers are the topological generations of
the (grouped) graph; boxes in a layer are ordered by a few barycenter sweeps to cut edge crossings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dagflow.plan.model import Plan

MAX_BOXES = 150
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


def _groups(plan: Plan, dropped: int) -> tuple[dict[str, Box], dict[str, str]]:
    boxes: dict[str, Box] = {}
    box_of: dict[str, str] = {}
    for node in plan.nodes.values():
        if dropped == 0:
            key, shared = node.name, dict(node.coords)
        else:
            key, shared = _group_key(node.step, node.coords, plan.steps[node.step].axes, dropped)
        box = boxes.get(key)
        if box is None:
            box = boxes[key] = Box(key, node.step, shared)
        box.members.append(node.name)
        box_of[node.name] = key
    return boxes, box_of


def group_plan(plan: Plan, max_boxes: int = MAX_BOXES) -> tuple[list[Box], dict[str, str]]:
    """The boxes at the finest grouping with at most max_boxes of them (one per step at the coarsest)."""
    most_axes = max((len(step.axes) for step in plan.steps.values()), default=0)
    for dropped in range(most_axes + 2):
        boxes, box_of = _groups(plan, dropped)
        if len(boxes) <= max_boxes:
            break
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
