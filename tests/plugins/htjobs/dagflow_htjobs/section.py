"""What the executor adds to the pipeline file: a top-level `htjobs:` block and the step field
`concurrency_limits` (HTCondor's), validated with the document, errors at file:line:column."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from dagflow.spec.sections import EngineSection

NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
Limit = Annotated[str, StringConstraints(pattern=rf"^{NAME}(:[0-9]+)?$")]


class Block(BaseModel):
    model_config = ConfigDict(extra="forbid")

    accounting_group: str | None = Field(None, pattern=f"^{NAME}$", description="HTCondor's accounting_group")


class StepFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency_limits: list[Limit] = Field(
        default_factory=list, description="HTCondor concurrency limits the step's jobs take: NAME or NAME:COUNT"
    )


SECTION = EngineSection(
    block=Block,
    block_help="settings of the htjobs executor",
    step_fields=StepFields,
    examples={"concurrency_limits": "[licence_server:2]"},
)
