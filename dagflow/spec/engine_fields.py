"""Which step fields an engine will ignore (one located warning per step and field).

Engines declare the fields they honour (engines/base.py RESOURCE_FIELDS); a pipeline that sets one the
chosen engine ignores still runs, but its nodes are placed without it, so the user hears of it. An engine's
own step fields (spec/sections.py) count as well: another engine places the nodes without them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from dagflow.errors import Diagnostic
from dagflow.policies import gpu_classes
from dagflow.spec.load import Spec
from dagflow.spec.model import RuntimeSpec, StepSpec
from dagflow.spec.yamlpos import Path_, dotted

_RESOURCE_KEYS = ("cpus", "memory", "memory_max", "disk", "gpus", "gpu_memory", "cuda_capability")
# `runtime:` keys, as honours names them: what runs the node on the execute node, not where it is placed.
RUNTIME_FIELDS = ("runtime.python", "runtime.container_image")


def _runtime_set(base: Path_, runtime: RuntimeSpec | None) -> Iterator[tuple[str, Path_]]:
    if runtime is None:
        return
    for key in ("python", "container_image"):
        if getattr(runtime, key):
            yield f"runtime.{key}", (*base, "runtime", key)


def _pipeline_runtime(spec: Spec, honours: frozenset[str], engine: str) -> list[Diagnostic]:
    warnings = []
    for field, path in _runtime_set((), spec.model.runtime):
        if field not in honours:
            line, column = spec.positions.of(path, key=True)
            warnings.append(Diagnostic(spec.filename or str(spec.file), line, column, dotted(path),
                                       f"the {engine} engine ignores {field}: its nodes run without it"))
    return warnings


def ignored_fields(spec: Spec, honours: frozenset[str], engine: str) -> list[Diagnostic]:
    """A warning for each field a step sets that `engine` (honouring `honours`) will not act on."""
    warnings = []
    engine_fields = list(spec.engines.step_field_names()) if spec.engines else []
    for name, step in spec.model.steps.items():
        for field, path in _fields_set(name, step, engine_fields):
            if field in honours:
                continue
            line, column = spec.positions.of(path, key=True)
            via = f" (through gpu_class {step.resources.gpu_class!r})" if path[-1] == "gpu_class" else ""
            effect = "its nodes run without it" if field in RUNTIME_FIELDS else "its nodes are placed without it"
            warnings.append(Diagnostic(
                spec.filename or str(spec.file), line, column, dotted(path),
                f"the {engine} engine ignores {field}{via}: {effect}",
            ))
    warnings += _pipeline_runtime(spec, honours, engine)
    return sorted(warnings, key=lambda warning: (warning.line, warning.column))


def _fields_set(name: str, step: StepSpec, engine_fields: Iterable[str]) -> Iterator[tuple[str, Path_]]:
    base: Path_ = ("steps", name)
    resources = step.resources
    for key in _RESOURCE_KEYS:
        if key in resources.model_fields_set:
            yield key, (*base, "resources", key)
    if resources.gpu_class:
        placement = gpu_classes().get(resources.gpu_class)
        path = (*base, "resources", "gpu_class")
        if placement is not None:
            for field, value in (("gpu_memory", placement.gpu_memory_mb),
                                 ("cuda_capability", placement.cuda_capability),
                                 ("requirements", placement.requirements)):
                own = field in resources.model_fields_set or getattr(step, field, None)
                if value is not None and not own:
                    yield field, path
    for field in engine_fields:
        if getattr(step, field, None) not in (None, {}, []):  # an empty default is not set
            yield field, (*base, field)
    if "priority" in step.model_fields_set:
        yield "priority", (*base, "priority")
    if step.timeout is not None:
        yield "timeout", (*base, "timeout")
    yield from _runtime_set(base, step.runtime)
