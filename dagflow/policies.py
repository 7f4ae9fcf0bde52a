"""Default policies shipped in policies/: GPU placement classes (name -> per-GPU limits)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

import yaml

from dagflow.data import data_dir


@dataclass(frozen=True, slots=True)
class GpuClass:
    """What every GPU a step gets must have; None where the class sets no limit.

    `requirements` is a machine-level ClassAd expression, kept for site files written before the
    per-GPU limits existed; it is ANDed with the step's own requirements.
    """

    description: str = ""
    gpu_memory_mb: int | None = None
    cuda_capability: float | None = None
    requirements: str | None = None


def _number(entry: dict[str, Any], name: str, field: str, kind: type[int] | type[float]) -> Any:
    value = entry.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"gpu-classes.yaml: class {name!r} {field} must be a positive number, not {value!r}")
    return kind(value)


def _gpu_class(name: str, entry: dict[str, Any]) -> GpuClass:
    requirements = entry.get("requirements")
    return GpuClass(
        description=str(entry.get("description", "")),
        gpu_memory_mb=_number(entry, name, "gpu_memory_mb", int),
        cuda_capability=_number(entry, name, "cuda_capability", float),
        requirements=str(requirements) if requirements is not None else None,
    )


@cache
def gpu_classes() -> dict[str, GpuClass]:
    with (data_dir("policies") / "gpu-classes.yaml").open(encoding="utf-8") as handle:
        document = yaml.safe_load(handle)
    return {str(name): _gpu_class(str(name), entry or {}) for name, entry in document["classes"].items()}
