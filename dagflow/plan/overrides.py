"""`--only AXIS=VALUE` and `--set NAME=VALUE`: plan part of a pipeline, or with other param values.

Params are overridden the way a search trial overrides them (expand's `params`): only nodes whose templates
use an overridden param change, so only they (and what reads their outputs) miss the cache. The overrides
are recorded in the plan (`Plan.overrides`), so a resume re-plans with them and `dagflow status` shows them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagflow.errors import DagflowError, SpecError, closest
from dagflow.plan.expand import StepResolver, expand, param_text
from dagflow.plan.model import Plan
from dagflow.plan.searched import RECORD_KEY, SearchedParams, expand_searched
from dagflow.spec.load import Spec
from dagflow.spec.yamlpos import load_yaml
from dagflow.text import CONTROL_CHARACTERS

ScalarValue = str | bool | int | float


class OverrideError(DagflowError):
    pass


@dataclass(frozen=True)
class Overrides:
    only: dict[str, tuple[str, ...]] = field(default_factory=dict)  # axis -> the values kept
    params: dict[str, ScalarValue] = field(default_factory=dict)  # param -> its value for this run
    searched: SearchedParams | None = None  # params from a finished search (plan/searched.py)

    def __bool__(self) -> bool:
        return bool(self.only or self.params or self.searched)

    def to_dict(self) -> dict[str, Any]:
        """As recorded in plan.json: only what was given."""
        recorded: dict[str, Any] = {}
        if self.only:
            recorded["only"] = {axis: list(values) for axis, values in self.only.items()}
        if self.params:
            recorded["set"] = dict(self.params)
        if self.searched:
            recorded[RECORD_KEY] = self.searched.to_dict()
        return recorded

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Overrides:
        only = {axis: tuple(values) for axis, values in data.get("only", {}).items()}
        searched = SearchedParams.from_dict(data[RECORD_KEY]) if RECORD_KEY in data else None
        return cls(only=only, params=dict(data.get("set", {})), searched=searched)

    def describe(self) -> str:
        """The overrides as the options that give them: `--only region=us --set alpha=0.5`, and where the
        params came from: `params from search 'tune': us t3, br t1`."""
        words = [f"--only {axis}={value}" for axis, values in self.only.items() for value in values]
        words += [f"--set {name}={param_text(value)}" for name, value in self.params.items()]
        return "; ".join(part for part in (" ".join(words), self.searched and self.searched.describe()) if part)


def parse_overrides(only: Sequence[str] = (), sets: Sequence[str] = ()) -> Overrides:
    """The overrides the options give (their syntax only; check_overrides checks them against the pipeline)."""
    chosen: dict[str, tuple[str, ...]] = {}
    for item in only:
        axis, value = _split("--only", item, "AXIS=VALUE, e.g. region=us")
        if value not in chosen.get(axis, ()):
            chosen[axis] = (*chosen.get(axis, ()), value)
    params: dict[str, ScalarValue] = {}
    for item in sets:
        name, text = _split("--set", item, "NAME=VALUE, e.g. alpha=0.5")
        params[name] = _scalar(item, text)
    return Overrides(chosen, params)


def _split(option: str, item: str, expected: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name.strip() or not value:
        raise OverrideError(f"{option} {item!r}: expected {expected}")
    return name.strip(), value


def _scalar(item: str, text: str) -> ScalarValue:
    """VALUE read as a YAML scalar, as the same text under `params:` would be: 0.5 a number, true a boolean."""
    if CONTROL_CHARACTERS.search(text):
        raise OverrideError(f"--set {item!r}: control characters (such as a newline) are not allowed in a value")
    try:
        value, _ = load_yaml(text, "--set")
    except SpecError as error:
        raise OverrideError(f"--set {item}: not a YAML value ({error.diagnostics[0].message})") from None
    if not isinstance(value, ScalarValue):
        raise OverrideError(f"--set {item}: expected one value (a number, true/false or text); quote it to pass text")
    return value


def check_overrides(spec: Spec, overrides: Overrides) -> None:
    """Every --only names a matrix axis and one of its values, every --set one of the pipeline's params."""
    model, where = spec.model, spec.filename or str(spec.file)
    for axis, values in overrides.only.items():
        if axis not in model.matrix:
            axes = ", ".join(model.matrix) or "none: the pipeline has no matrix"
            raise OverrideError(
                f"--only {axis}={values[0]}: {axis!r} is not a matrix axis of {where} (its axes: {axes})"
            )
        unknown = [value for value in values if value not in model.matrix[axis]]
        if unknown:
            raise OverrideError(
                f"--only {axis}={unknown[0]}: {unknown[0]!r} is not a value of {axis} in {where} "
                f"(its values: {', '.join(model.matrix[axis])})"
            )
    for name in overrides.params:
        if name not in model.params:
            known = ", ".join(model.params) or "none: the pipeline has no params"
            hint = closest(name, model.params)
            raise OverrideError(f"--set {name}: {name!r} is not a param of {where} (its params: {known})"
                                + (f"; {hint}" if hint else ""))


def plan_with(spec: Spec, run_id: str | None, overrides: Overrides, *, resolve: StepResolver | None) -> Plan:
    """The plan of spec with the overrides applied and recorded (a plain expand when there are none);
    resolve fills in `auto` resources (expand's StepResolver)."""
    check_overrides(spec, overrides)
    if overrides.searched:
        plan = expand_searched(spec, run_id, overrides.searched, overrides.params, resolve)
    else:
        plan = expand(spec, run_id=run_id, params=overrides.params, resolve=resolve)
    if overrides.only:
        plan = select(plan, overrides.only)
    plan.overrides = overrides.to_dict()
    return plan


def select(plan: Plan, chosen: Mapping[str, Collection[str]]) -> Plan:
    """The nodes whose value on each chosen axis is one of its chosen values, and that need only kept nodes.

    A node that gathers over a chosen axis has no value on it: it is kept only when every node it needs is
    (a report over regions needs every region's nodes), and a node whose parent was left out is left out.
    """
    kept = {}
    for name, node in plan.nodes.items():  # in topological order: parents are decided first
        if _matches(node.coords, chosen) and all(parent in kept for parent in node.parents):
            kept[name] = node
    if not kept:
        wanted = " ".join(f"{axis}={','.join(values)}" for axis, values in chosen.items())
        raise OverrideError(f"no node of pipeline {plan.pipeline} has {wanted}")
    plan.nodes = kept
    return plan


def _matches(coords: Mapping[str, str], chosen: Mapping[str, Collection[str]]) -> bool:
    return all(axis not in coords or coords[axis] in values for axis, values in chosen.items())
