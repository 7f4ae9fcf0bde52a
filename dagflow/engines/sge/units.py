"""Group the nodes to submit into Grid Engine jobs: the batch engines' grouping
(engines/batch/units.py, one job array per step where the wiring allows), renumbered for Grid Engine.

`qsub -t` takes one range, and `-hold_jid_ad` (task i waits for task i of the parent array, Slurm's
`aftercorr`) wants both arrays to have the same range. So an array's tasks are numbered 1..n in the order
of their index within the step: two arrays that correspond submit the same indices, so they get the
same numbers, and a resume that submits only some of a step's nodes still gets one range.
"""

from __future__ import annotations

from collections.abc import Iterable

from dagflow.engines.batch.units import SINGLE, Unit, plan_units
from dagflow.plan import Plan

__all__ = ["SINGLE", "Unit", "sge_units"]


def sge_units(plan: Plan, todo: Iterable[str], max_array: int, arrays: bool = True) -> list[Unit]:
    units = plan_units(plan, todo, max_array, arrays)
    for unit in units:
        if unit.is_array:
            unit.tasks = {number: unit.tasks[task] for number, task in enumerate(sorted(unit.tasks), start=1)}
    return units
