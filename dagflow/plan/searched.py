"""Params taken from a finished search (`params: {from_search: NAME}`, `dagflow run --params-from-search NAME`).

A per-region search ends with one best trial per value of its axis; each of that value's nodes runs with its
trial's params, a node of no value (a report gathering the regions) with the pipeline's defaults. What a run
took is recorded in its plan (`Plan.overrides["from_search"]`), so a resume re-plans with the same values
whatever the search did since, and the run's provenance (run/provenance.py) names each value's trial.
Which trial is a search's best is the search's to say (search/results.py); this module only applies it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagflow.errors import DagflowError
from dagflow.plan.expand import StepResolver, expand, new_run_id, param_text
from dagflow.plan.model import Plan
from dagflow.spec.load import Spec

RECORD_KEY = "from_search"  # its key in Plan.overrides


class SearchedParamsError(DagflowError):
    pass


@dataclass(frozen=True, slots=True)
class TrialChoice:
    """One value's best trial: its number, its run, and the params it ran with."""

    trial: int
    run_id: str
    params: dict[str, Any]

    def label(self, search: str) -> str:
        """How reports name it: `search 'tune' t3`."""
        return f"search {search!r} t{self.trial}"


@dataclass(frozen=True, slots=True)
class SearchedParams:
    search: str
    axis: str | None  # the matrix axis the search ran per; None: one best trial for the whole pipeline
    chosen: dict[str, TrialChoice]  # axis value ("" without an axis) -> its best trial

    def to_dict(self) -> dict[str, Any]:
        return {
            "search": self.search,
            "axis": self.axis,
            "chosen": {
                value: {"trial": c.trial, "run_id": c.run_id, "params": c.params} for value, c in self.chosen.items()
            },
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SearchedParams:
        chosen = {str(value): TrialChoice(int(c["trial"]), str(c["run_id"]), dict(c["params"]))
                  for value, c in data["chosen"].items()}  # fmt: skip
        return cls(str(data["search"]), data.get("axis"), chosen)

    def choice_of(self, coords: Mapping[str, str]) -> TrialChoice | None:
        """The trial whose params a node of these coordinates runs with; None for a node of no value."""
        if self.axis is None:
            return self.chosen.get("")
        value = coords.get(self.axis)
        return None if value is None else self.chosen.get(value)

    def describe(self) -> str:
        """`params from search 'tune': us t3, br t1` (as `dagflow status` notes it)."""
        chosen = sorted(self.chosen.items())
        trials = ", ".join(f"{value} t{choice.trial}" if value else f"t{choice.trial}" for value, choice in chosen)
        return f"params from search {self.search!r}: {trials}"

    def param_names(self) -> set[str]:
        return {name for choice in self.chosen.values() for name in choice.params}


def expand_searched(
    spec: Spec, run_id: str | None, searched: SearchedParams, sets: Mapping[str, Any], resolve: StepResolver | None
) -> Plan:
    """The plan with each axis value's nodes taking its trial's params (--set still wins over them)."""
    run_id = run_id or new_run_id(spec.model.name)
    if searched.axis is None:
        return expand(spec, run_id, params={**searched.chosen[""].params, **sets}, resolve=resolve)
    plan = expand(spec, run_id, params=sets, resolve=resolve)
    _check_gathering_nodes(plan, searched, sets)
    for value, choice in searched.chosen.items():
        regional = expand(spec, run_id, params={**choice.params, **sets}, resolve=resolve)
        for name, node in regional.nodes.items():
            if node.coords.get(searched.axis) == value:
                plan.nodes[name] = node
    return plan


def _check_gathering_nodes(plan: Plan, searched: SearchedParams, sets: Mapping[str, Any]) -> None:
    """A node of no axis value that uses a searched param would silently run with the default: refused."""
    searched_names = searched.param_names() - set(sets)
    for node in plan.nodes.values():
        used = sorted(searched_names & set(node.params))
        if searched.axis not in node.coords and used:
            names = ", ".join(f"{{params.{name}}}" for name in used)
            raise SearchedParamsError(
                f"step {node.step} uses {names}, which search {searched.search!r} chose per {searched.axis}, "
                f"but it does not fan out over {searched.axis}: no one {searched.axis}'s value applies to it "
                f"(give it with --set, e.g. --set {used[0]}={param_text(node.params[used[0]])})"
            )
