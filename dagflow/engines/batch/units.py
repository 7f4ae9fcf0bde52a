"""Group the nodes to submit into batch jobs (Slurm's and Grid Engine's, which renumbers the tasks:
engines/sge/submit.py sge_units): one job array per step where the wiring allows, else one job per node.

An array carries one dependency for all its tasks, so a step becomes an array only when, towards each
parent step, its wiring is one of two shapes Slurm (and Grid Engine) can say in one clause:

- corresponding: task i needs exactly task i of the parent array (same task ids on both sides; the
  region chain stage.us -> train.us): `aftercorr:<parent array>`;
- all: every task needs every submitted node of the parent step (a gather, or a fan-out from a single
  node): `afterok:<parent job>`.

Any other wiring (say a step over region x trial under a step over region) falls back to one job per
node with an `afterok:` list naming exactly its parents' jobs or array tasks (`123_4`). Nodes already
done (on a resume) are not submitted and are not waited for.

Task ids are a node's index within its step, so a resume resubmits the same ids. A step wider than the
cluster's MaxArraySize is cut into chunks of that size; chunk k of a step still corresponds to chunk k of
its parent step when both submit the same indices.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from dagflow.plan import Plan


@dataclass(slots=True)
class Unit:
    """One sbatch submission: an array (tasks) or a single node."""

    name: str  # for the script file and job name: the step (array chunk) or the node
    step: str
    tasks: dict[int, str]  # task id -> node; a single-node unit uses task -1
    is_array: bool
    chunk: int = 0  # which MaxArraySize-wide slice of the step an array covers
    # ("aftercorr" | "afterok", unit index): whole parent units; node_deps: single parent nodes. Job ids
    # are resolved at submit time.
    unit_deps: list[tuple[str, int]] = field(default_factory=list)
    node_deps: list[str] = field(default_factory=list)  # parent nodes (single-node units only)

    @property
    def nodes(self) -> list[str]:
        return list(self.tasks.values())


SINGLE = -1


def _runs(indices: list[int], size: int) -> dict[int, list[int]]:
    chunks: dict[int, list[int]] = {}
    for index in indices:
        chunks.setdefault(index // size, []).append(index)
    return chunks


def plan_units(plan: Plan, todo: Iterable[str], max_array: int, arrays: bool = True) -> list[Unit]:
    """Units for the nodes in todo, in an order where every unit comes after those it depends on.

    arrays=False submits one job per node (for comparison; the benchmark measures both).
    """
    todo_set = set(todo)
    index: dict[str, int] = {}
    by_step: dict[str, list[str]] = {}
    for name, node in plan.nodes.items():  # plan.nodes is topological, so steps come parents first
        members = by_step.setdefault(node.step, [])
        index[name] = len(members)
        members.append(name)

    units: list[Unit] = []
    # step -> (submitted indices, chunk -> unit index) when the step went out as arrays
    array_steps: dict[str, tuple[frozenset[int], dict[int, int]]] = {}
    single_unit: dict[str, int] = {}  # node -> unit index, for nodes submitted as their own job
    for step, members in by_step.items():
        submit = [name for name in members if name in todo_set]
        if not submit:
            continue
        indices = [index[name] for name in submit]
        live = {name: [p for p in plan.nodes[name].parents if p in todo_set] for name in submit}
        shapes = _array_shapes(plan, submit, live, index, array_steps, by_step, todo_set)
        if arrays and len(submit) > 1 and shapes is not None:
            chunk_units: dict[int, int] = {}
            for chunk, chunk_indices in _runs(indices, max_array).items():
                tasks = {i - chunk * max_array: members[i] for i in chunk_indices}
                deps: list[tuple[str, int]] = []
                for kind, parent_step in shapes:
                    parent_chunks = array_steps[parent_step][1] if parent_step in array_steps else None
                    if kind == "aftercorr":
                        assert parent_chunks is not None
                        deps.append((kind, parent_chunks[chunk]))
                    elif parent_chunks is not None:
                        deps.extend(("afterok", unit) for unit in parent_chunks.values())
                    else:
                        deps.extend(("afterok", single_unit[p]) for p in by_step[parent_step] if p in todo_set)
                name = step if chunk == 0 else f"{step}.chunk{chunk}"
                chunk_units[chunk] = len(units)
                units.append(Unit(name, step, tasks, True, chunk, unit_deps=sorted(set(deps))))
            array_steps[step] = (frozenset(indices), chunk_units)
        else:
            for name in submit:
                single_unit[name] = len(units)
                unit = Unit(name, step, {SINGLE: name}, False)
                _single_deps(plan, unit, live[name], array_steps, by_step, todo_set)
                units.append(unit)
    return units


def _array_shapes(
    plan: Plan,
    submit: list[str],
    live: dict[str, list[str]],
    index: dict[str, int],
    array_steps: dict[str, tuple[frozenset[int], dict[int, int]]],
    by_step: dict[str, list[str]],
    todo: set[str],
) -> list[tuple[str, str]] | None:
    """[(aftercorr | afterok, parent step)] if one dependency clause per parent step wires every task
    correctly, else None."""
    parent_steps: dict[str, None] = {}
    for name in submit:
        for parent in live[name]:
            parent_steps.setdefault(plan.nodes[parent].step, None)
    indices = frozenset(index[name] for name in submit)
    shapes = []
    for parent_step in parent_steps:
        submitted_parents = [p for p in by_step[parent_step] if p in todo]
        per_node = {name: [p for p in live[name] if plan.nodes[p].step == parent_step] for name in submit}
        if all(parents == submitted_parents or set(parents) == set(submitted_parents) for parents in per_node.values()):
            shapes.append(("afterok", parent_step))
        elif (
            parent_step in array_steps
            and array_steps[parent_step][0] == indices
            and all(len(parents) == 1 and index[parents[0]] == index[name] for name, parents in per_node.items())
        ):
            shapes.append(("aftercorr", parent_step))
        else:
            return None
    return shapes


def _single_deps(
    plan: Plan,
    unit: Unit,
    parents: list[str],
    array_steps: dict[str, tuple[frozenset[int], dict[int, int]]],
    by_step: dict[str, list[str]],
    todo: set[str],
) -> None:
    """A single node after every submitted node of an array step waits for the arrays, not each task."""
    from_step: dict[str, list[str]] = {}
    for parent in parents:
        from_step.setdefault(plan.nodes[parent].step, []).append(parent)
    for step, step_parents in from_step.items():
        submitted = [name for name in by_step[step] if name in todo]
        if step in array_steps and set(step_parents) == set(submitted):
            unit.unit_deps.extend(("afterok", chunk_unit) for chunk_unit in array_steps[step][1].values())
        else:
            unit.node_deps.extend(step_parents)
