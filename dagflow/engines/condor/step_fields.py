"""What the condor engine reads from its own section of a plan step (plan/model.py StepInfo.engine_fields):
the ClassAd `requirements` the step's nodes must satisfy, the GPU placement class's and the step's own."""

from __future__ import annotations

from dagflow.plan.model import StepInfo

SECTION = "condor"  # this engine's section of a step and of Plan.engine_defaults


def requirements_parts(step: StepInfo) -> list[str]:
    """The ClassAd expressions that must all hold, as the pipeline (and its GPU class) wrote them."""
    return list(step.engine_fields.get(SECTION, {}).get("requirements", ()))


def requirements_expression(step: StepInfo) -> str | None:
    """The step's requirements as one ClassAd expression (each part parenthesised when there are several);
    None when unconstrained."""
    parts = requirements_parts(step)
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else " && ".join(f"({part})" for part in parts)
