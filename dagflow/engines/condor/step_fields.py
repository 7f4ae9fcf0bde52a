"""What the condor engine reads from its own section of a plan step (plan/model.py StepInfo.engine_fields,
made by sections.py plan_fields): the ClassAd `requirements` the step's nodes must satisfy, the GPU placement
class's and the step's own, and the step's custom job attributes (`classads`)."""

from __future__ import annotations

from typing import Any

from dagflow.plan.model import StepInfo

SECTION = "condor"  # this engine's section of a step and of Plan.engine_defaults


def requirements_parts(step: StepInfo) -> list[str]:
    """The ClassAd expressions that must all hold, as the pipeline (and its GPU class) wrote them."""
    parts = step.engine_section(SECTION).get("requirements")
    return [parts] if isinstance(parts, str) else list(parts or ())  # a format 1 plan's: one expression


def requirements_expression(step: StepInfo) -> str | None:
    """The step's requirements as one ClassAd expression (each part parenthesised when there are several);
    None when unconstrained."""
    parts = requirements_parts(step)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " && ".join(f"({part})" for part in parts)


def custom_attributes(step: StepInfo) -> dict[str, Any]:
    """The step's `classads`: attribute name -> value, as the pipeline wrote them."""
    return dict(step.engine_section(SECTION).get("classads", {}))
