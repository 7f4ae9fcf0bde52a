"""The condor engine's parts of the pipeline file (spec/sections.py): its `condor:` block and the step fields
only HTCondor reads, `requirements` (a ClassAd expression) and `classads` (custom job attributes).

Validated with the document (their errors located like every other); what else they must satisfy is in
spec_checks.py. In the plan they ride in the step's condor section (step_fields.py reads them there).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from dagflow.engines.condor.escape import POOL_NAME
from dagflow.engines.condor.settings import DATA_MODES, DEFAULT_MAX_TRANSFER_OUTPUT_MB
from dagflow.policies import gpu_classes
from dagflow.spec.model import Identifier, ScalarValue, StepSpec, Strict
from dagflow.spec.sections import EngineSection


class CondorSpec(Strict):
    data_mode: Literal[DATA_MODES] | None = Field(  # type: ignore[valid-type]
        None,
        description="transfer: nothing is shared, each node gets its declared inputs and scripts through "
        "HTCondor file transfer and sends its declared outputs back; shared: jobs run in the pipeline's "
        "directory on a shared filesystem [default: transfer; `--data-mode` overrides]",
    )
    max_transfer_output_mb: int | None = Field(
        None,
        ge=1,
        description="transfer mode: the most MiB one node's job may send back (HTCondor's max_transfer_output_mb); "
        "a job over it is held, then removed, and the node fails saying so "
        f"[default: {DEFAULT_MAX_TRANSFER_OUTPUT_MB}]",
    )
    accounting_group: str | None = Field(
        None, pattern=f"^{POOL_NAME}$",
        description="the accounting group the run's jobs count against (HTCondor's accounting_group; "
        "`--accounting-group` overrides)",
    )
    accounting_group_user: str | None = Field(
        None, pattern=f"^{POOL_NAME}$",
        description="the user within that group (HTCondor's accounting_group_user; `--accounting-group-user` "
        "overrides)",
    )
    batch_name: str | None = Field(
        None, pattern=f"^{POOL_NAME}$",
        description="the name condor_q shows the run's jobs under (DAGMan's -batch-name) [default: the run id; "
        "`--batch-name` overrides]",
    )


class CondorStepFields(Strict):
    requirements: str | None = Field(
        None, description="extra ClassAd expression the machine must satisfy (ANDed with HAS_GPU for GPU steps)"
    )
    classads: dict[Identifier, ScalarValue] = Field(
        default_factory=dict, description="custom job ClassAd attributes, written as My.<Name>"
    )


def plan_fields(step: StepSpec) -> dict[str, Any]:
    """The step's condor section of the plan: `requirements` as the expressions that must all hold, the GPU
    placement class's first and the step's own as written (combined in step_fields.py), and `classads`."""
    parts = []
    placement = gpu_classes()[step.resources.gpu_class] if step.resources.gpu_class else None
    if placement is not None and placement.requirements:
        parts.append(placement.requirements)
    own: str | None = getattr(step, "requirements", None)
    if own:
        parts.append(own.strip())
    fields: dict[str, Any] = {"requirements": parts} if parts else {}
    classads = getattr(step, "classads", None)
    if classads:
        fields["classads"] = dict(classads)
    return fields


SECTION = EngineSection(
    block=CondorSpec,
    block_help="HTCondor engine settings: {data_mode: transfer|shared, max_transfer_output_mb: MiB, "
    "accounting_group: NAME, accounting_group_user: NAME, batch_name: NAME}",
    step_fields=CondorStepFields,
    examples={"condor": "a mapping such as {data_mode: transfer}", "classads": "a mapping such as {DagflowTeam: recs}"},
    plan_fields=plan_fields,
)
