"""A plan's index: what reading a run's status needs of its plan, in a file read without building the plan.

A 100k-node plan.json is about 30 MB, and building its Plan takes seconds; `dagflow status` needs only the
node names in plan (topological) order, each node's step, matrix coordinates and parents, and each step's
retries, resources and checkpoint exit code. PlanIndex holds those as columns (a node is its position in
`names`), and its JSON is a tenth of the plan's. It is derived data: whoever keeps one beside a plan also
keeps what tells it stale (run/status.py keys it by plan.json's size and modification time), and rebuilds
it from the plan.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from itertools import accumulate, compress
from typing import Any

from dagflow.plan.model import Plan, Resources

INDEX_FORMAT = 3  # 2: a step's checkpoint exit code; 3: the exit codes it is not retried after


@dataclass(frozen=True, slots=True)
class StepSummary:
    retries: int
    resources: Resources
    checkpoint_exit_code: int | None = None  # as StepInfo's: the step checkpoints itself (exits to run again)
    retry_unless_exit: tuple[int, ...] = ()  # as StepInfo's: exit codes that end the node, retries or not

    def retried_after(self, attempts: int, exit_code: int | None) -> bool:
        """Whether a node of this step that failed its attempt number `attempts` with exit_code runs again."""
        return attempts <= self.retries and exit_code not in self.retry_unless_exit


@dataclass(slots=True)
class PlanIndex:
    pipeline: str
    run_id: str
    overrides: dict[str, Any]
    steps: dict[str, StepSummary]  # in the plan's order
    names: list[str]  # the nodes, in plan order
    step_of: list[int]  # per node: its step's position in `steps`
    axis_values: dict[str, list[str]]  # per matrix axis: its values, in first-seen order
    coord_axes: list[list[str]]  # the distinct key orders of the nodes' coordinates
    coord_axes_of: list[int]  # per node: its coordinates' key order (a position in coord_axes)
    coord_value_of: dict[str, list[int]]  # per axis, per node: the value's position in axis_values (-1: none)
    parent_counts: list[int]  # per node: how many parents it has
    parent_list: list[int]  # the parents' positions, node after node (parent_counts says how many each)
    _position: dict[str, int] | None = field(default=None, repr=False, compare=False)
    _step_names: list[str] | None = field(default=None, repr=False, compare=False)
    _parent_starts: list[int] | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, plan: Plan) -> PlanIndex:
        names = list(plan.nodes)
        position = {name: index for index, name in enumerate(names)}
        step_names = list(plan.steps)
        step_position = {name: index for index, name in enumerate(step_names)}
        axis_values: dict[str, list[str]] = {}
        value_position: dict[str, dict[str, int]] = {}
        coord_axes: list[list[str]] = []
        axes_position: dict[tuple[str, ...], int] = {}
        coord_value_of: dict[str, list[int]] = {}
        coord_axes_of: list[int] = []
        step_of: list[int] = []
        parent_counts: list[int] = []
        parent_list: list[int] = []
        for index, node in enumerate(plan.nodes.values()):
            step_of.append(step_position[node.step])
            keys = tuple(node.coords)
            if keys not in axes_position:
                axes_position[keys] = len(coord_axes)
                coord_axes.append(list(keys))
            coord_axes_of.append(axes_position[keys])
            for axis, value in node.coords.items():
                if axis not in coord_value_of:
                    coord_value_of[axis] = [-1] * len(names)
                    axis_values[axis], value_position[axis] = [], {}
                positions = value_position[axis]
                if value not in positions:
                    positions[value] = len(axis_values[axis])
                    axis_values[axis].append(value)
                coord_value_of[axis][index] = positions[value]
            known = [position[parent] for parent in node.parents if parent in position]
            parent_counts.append(len(known))
            parent_list.extend(known)
        steps = {
            name: StepSummary(step.retries, step.resources, step.checkpoint_exit_code, step.retry_unless_exit)
            for name, step in plan.steps.items()
        }
        return cls(
            plan.pipeline, plan.run_id, dict(plan.overrides), steps, names, step_of, axis_values, coord_axes,
            coord_axes_of, coord_value_of, parent_counts, parent_list, position, step_names,
        )  # fmt: skip

    @property
    def position(self) -> dict[str, int]:
        """Node name -> its position."""
        if self._position is None:
            self._position = {name: index for index, name in enumerate(self.names)}
        return self._position

    @property
    def step_names(self) -> list[str]:
        if self._step_names is None:
            self._step_names = list(self.steps)
        return self._step_names

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.position

    def step(self, index: int) -> str:
        return self.step_names[self.step_of[index]]

    def node_steps(self) -> list[str]:
        """Each node's step, in plan order."""
        step_names = self.step_names
        return [step_names[step] for step in self.step_of]

    def parents(self, index: int) -> list[int]:
        """The positions of a node's parents."""
        if self._parent_starts is None:
            self._parent_starts = [0, *accumulate(self.parent_counts)]
        return self.parent_list[self._parent_starts[index] : self._parent_starts[index + 1]]

    def coords(self, index: int) -> dict[str, str]:
        return {
            axis: self.axis_values[axis][self.coord_value_of[axis][index]]
            for axis in self.coord_axes[self.coord_axes_of[index]]
        }

    def to_json(self, **extra: Any) -> str:
        """The index as JSON; `extra` keys (what the keeper checks it against) are written beside it."""
        data = {
            "format": INDEX_FORMAT,
            **extra,
            "pipeline": self.pipeline,
            "run_id": self.run_id,
            "overrides": self.overrides,
            "steps": [
                [name, step.retries, asdict(step.resources), step.checkpoint_exit_code, list(step.retry_unless_exit)]
                for name, step in self.steps.items()
            ],
            "names": self.names,
            "step_of": self.step_of,
            "axis_values": self.axis_values,
            "coord_axes": self.coord_axes,
            "coord_axes_of": self.coord_axes_of,
            "coord_value_of": self.coord_value_of,
            "parent_counts": self.parent_counts,
            "parent_list": self.parent_list,
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanIndex:
        """The index of to_json's parsed text; ValueError when it is not a well-formed one."""
        try:
            if data["format"] != INDEX_FORMAT:
                raise ValueError(f"index format {data['format']!r}")
            steps = {
                str(name): StepSummary(
                    int(retries), Resources(**resources), None if code is None else int(code),
                    tuple(int(exit_code) for exit_code in unless),
                )
                for name, retries, resources, code, unless in data["steps"]
            }
            index = cls(
                str(data["pipeline"]), str(data["run_id"]), dict(data["overrides"]), steps, data["names"],
                data["step_of"], data["axis_values"], data["coord_axes"], data["coord_axes_of"],
                data["coord_value_of"], data["parent_counts"], data["parent_list"],
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"not a plan index: {error!r}") from None
        index._check()
        return index

    def _check(self) -> None:
        """Every column is as long as `names`, of its type, and points where it can; ValueError where not.
        (C-level passes over the columns: a 100k-node index is checked in milliseconds.)"""
        count = len(self.names)
        lists = (self.names, self.step_of, self.coord_axes_of, self.parent_counts, *self.coord_value_of.values())
        if not all(isinstance(column, list) and len(column) == count for column in lists):
            raise ValueError("not a plan index: columns of different lengths")
        if not _all_of(self.names, str) or len(self.position) != count:
            raise ValueError("not a plan index: node names")
        if not _ints_in(self.step_of, 0, len(self.steps)):
            raise ValueError("not a plan index: steps")
        parents_total = sum(self.parent_counts) if _ints_in(self.parent_counts, 0, count + 1) else -1
        if parents_total != len(self.parent_list) or not _ints_in(self.parent_list, 0, count):
            raise ValueError("not a plan index: parents")
        if not _all_of(self.coord_axes, list) or not _ints_in(self.coord_axes_of, 0, len(self.coord_axes)):
            raise ValueError("not a plan index: coordinates")
        for axis, column in self.coord_value_of.items():
            values = self.axis_values.get(axis)
            if not isinstance(values, list) or not _all_of(values, str) or not _ints_in(column, -1, len(values)):
                raise ValueError(f"not a plan index: axis {axis!r}")
        for axis, column in self.coord_value_of.items():  # a node's coordinates have a value for each key
            keyed = [axis in axes for axes in self.coord_axes]
            if any(keyed) and min(compress(column, map(keyed.__getitem__, self.coord_axes_of)), default=0) < 0:
                raise ValueError(f"not a plan index: axis {axis!r}")
        if any(not set(axes) <= self.coord_value_of.keys() for axes in self.coord_axes):
            raise ValueError("not a plan index: coordinates")


def _all_of(column: list[Any], kind: type) -> bool:
    return set(map(type, column)) <= {kind}


def _ints_in(column: list[Any], low: int, high: int) -> bool:
    """Every item is an int in [low, high)."""
    return _all_of(column, int) and (not column or (min(column) >= low and max(column) < high))
