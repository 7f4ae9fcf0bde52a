"""The names of the Dagflow* attributes every engine attaches to a node's job (as job
attributes, or a batch job's comment): named here once, for the engines and for validation."""

from __future__ import annotations

from collections.abc import Iterable

PREFIX = "Dagflow"
PIPELINE = "DagflowPipeline"
RUN_ID = "DagflowRunId"
STEP = "DagflowStep"
KIND = "DagflowKind"
NODE = "DagflowNode"
TRIAL = "DagflowTrial"
BUILTIN_ATTRIBUTES = (PIPELINE, RUN_ID, STEP, KIND, NODE, TRIAL)


def attribute_name(axis: str) -> str:
    """A matrix axis's attribute: `region` -> `DagflowRegion`, `data_split` -> `DagflowDataSplit`."""
    return PREFIX + "".join(part[:1].upper() + part[1:] for part in axis.split("_") if part)


def reserved_attributes(axes: Iterable[str]) -> dict[str, str]:
    """Every attribute dagflow sets for a pipeline with these matrix axes: lower-cased name (job
    attribute names are case-insensitive) -> what sets it."""
    reserved = {name.lower(): "dagflow" for name in BUILTIN_ATTRIBUTES}
    reserved.update((attribute_name(axis).lower(), f"matrix axis {axis!r}") for axis in axes)
    return reserved
