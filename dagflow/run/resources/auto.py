"""`auto` resources at plan time: each `auto` field takes what the pipeline's past runs suggest.

The value used and why are recorded in the plan (StepInfo.resource_notes, shown by `dagflow plan`).
With no history for a field, the field's default is used and a warning names it, once per process.
History is read once per expansion, only when some step says `auto` (see history.py for where).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from dagflow.errors import Diagnostic
from dagflow.plan.model import Resources, StepInfo
from dagflow.spec.load import Spec
from dagflow.spec.model import AUTO, StepSpec
from dagflow.spec.yamlpos import dotted

if TYPE_CHECKING:  # history and its reading are imported when some step says `auto` (most plans: none)
    from dagflow.run.resources.suggest import Suggestion

_DEFAULTS = Resources()
_FALLBACK = {"cpus": _DEFAULTS.cpus, "memory": _DEFAULTS.memory_mb, "gpu_memory": None, "timeout": None}
_warned: set[str] = set()  # warnings given: each once per process


def auto_fields(step: StepSpec) -> list[str]:
    res = step.resources
    fields = [name for name in ("cpus", "memory", "gpu_memory") if getattr(res, name) == AUTO]
    return [*fields, "timeout"] if step.timeout == AUTO else fields


class AutoResources:
    def __init__(self, spec: Spec) -> None:
        self.spec = spec
        self._suggestions: dict[str, dict[str, Suggestion]] | None = None
        self._runs = 0

    def suggestions(self) -> dict[str, dict[str, Suggestion]]:
        if self._suggestions is None:
            from dagflow.run.resources.history import default_runs_dirs, pipeline_history, skipped_warnings
            from dagflow.run.resources.suggest import suggest

            model = self.spec.model
            history = pipeline_history(model.name, default_runs_dirs(self.spec.file))
            self._runs = len(history)
            for warning in skipped_warnings(history):
                self._warn_once(warning)
            growth = {name: step.resources.memory_growth for name, step in model.steps.items()}
            self._suggestions = suggest(history, growth)
        return self._suggestions

    def resolve(self, name: str, step: StepSpec, info: StepInfo) -> StepInfo:
        """info with its `auto` fields filled in and explained in resource_notes."""
        fields = auto_fields(step)
        if not fields:
            return info
        learned = self.suggestions().get(name, {})
        values: dict[str, int | None] = {}
        notes: dict[str, str] = {}
        for field in fields:
            suggestion = learned.get(field)
            if suggestion is None or suggestion.value is None:
                values[field] = _FALLBACK[field]
                shown = "none" if _FALLBACK[field] is None else _shown(field, _FALLBACK[field])
                why = "no usage recorded" if suggestion is None else suggestion.why
                notes[field] = f"auto: {why} for step {name} in {self._runs} past run(s); default {shown}"
                self._warn(name, field, notes[field])
                continue
            value = suggestion.value
            evidence = suggestion.evidence
            notes[field] = (
                f"auto: {suggestion.as_yaml()} from {evidence.samples} sample(s) in {evidence.runs} run(s) "
                f"({suggestion.why})"
            )
            cap = step.resources.memory_max
            if field == "memory" and cap is not None and value > cap:
                value = cap
                notes[field] += f"; capped at memory_max {cap} MB"
            values[field] = value
        res = info.resources
        gpu_memory = res.gpu_memory_mb
        if "gpu_memory" in values:
            gpu_memory = _stricter(values["gpu_memory"], res.gpu_memory_mb)
        resources = replace(
            res,
            cpus=int(values.get("cpus") or res.cpus),
            memory_mb=int(values.get("memory") or res.memory_mb),
            gpu_memory_mb=gpu_memory,
        )
        timeout = values.get("timeout", info.timeout_s)
        return replace(info, resources=resources, timeout_s=timeout, resource_notes=notes)

    def _warn(self, step: str, field: str, message: str) -> None:
        path = ("steps", step, "timeout") if field == "timeout" else ("steps", step, "resources", field)
        line, column = self.spec.positions.of(path)
        where = Diagnostic(self.spec.filename or str(self.spec.file), line, column, dotted(path), message)
        self._warn_once(where.render())

    @staticmethod
    def _warn_once(message: str) -> None:
        if message not in _warned:
            _warned.add(message)
            print(f"warning: {message}", file=sys.stderr)


def _stricter(learned: int | None, placement: int | None) -> int | None:
    """A gpu_class's minimum still holds under a learned gpu_memory."""
    if learned is None or placement is None:
        return learned if placement is None else placement
    return max(learned, placement)


def _shown(field: str, value: int) -> str:
    return f"{value} MB" if field in ("memory", "gpu_memory") else f"{value}s" if field == "timeout" else str(value)
