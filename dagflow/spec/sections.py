"""What engines add to the pipeline file: a top-level block of their own and step fields of their own.

The spec knows no engine. An engine declares its section (engines/base.py EngineDeclaration.section): the
model of its block (the top-level key named after the engine) and a model whose fields are its step fields.
The registry hands the installed engines' sections to load_spec (EngineSections); the document is then
validated against the neutral models with the engines' parts added, so their errors are located and worded
like every other one, and a key nobody declares is still refused with a did-you-mean. The plan carries
what an engine's parts hold, opaque, in that engine's section (plan/model.py StepInfo.engine_fields).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, Field, StringConstraints, create_model

from dagflow.errors import Diagnostic
from dagflow.spec.model import STEP_NAME, PipelineSpec, StepRules, StepSpec

PlanFields = Callable[[StepSpec], dict[str, Any]]
"""An engine's section of one plan step, from the step as the document writes it (its fields included)."""


@dataclass(frozen=True, eq=False)  # one object per engine: its identity is its hash (the models are cached by it)
class EngineSection:
    """One engine's parts of the pipeline file."""

    block: type[BaseModel] | None = None  # its top-level block, under the engine's name
    block_help: str = ""  # the block's description in `dagflow schema`
    step_fields: type[BaseModel] | None = None  # a model whose fields are step fields only it reads
    examples: Mapping[str, str] = field(default_factory=dict)  # field -> what a mapping there looks like
    # its section of a plan step; None: the step fields the step sets, as given
    plan_fields: PlanFields | None = None

    def fields_of(self, step: StepSpec) -> dict[str, Any]:
        """This engine's section of the plan step (empty when the step sets none of its fields)."""
        if self.plan_fields is not None:
            return self.plan_fields(step)
        names = self.step_fields.model_fields if self.step_fields is not None else {}
        return {name: getattr(step, name) for name in names if name in step.model_fields_set}


@dataclass(frozen=True)
class EngineSections:
    """What load_spec is given by the registry (engines/registry.py spec_checks): every available engine's
    section, by engine name, and the engines' spec checks."""

    sections: tuple[tuple[str, EngineSection], ...] = ()
    checks: tuple[Callable[[Any], list[Diagnostic]], ...] = ()  # spec/load.py SpecCheck, each

    def step_field_names(self) -> dict[str, str]:
        """Every engine step field -> the engine declaring it."""
        return {name: engine for engine, section in self.sections if section.step_fields is not None
                for name in section.step_fields.model_fields}

    def examples(self) -> dict[str, str]:
        return {key: text for _, section in self.sections for key, text in section.examples.items()}

    def pipeline_model(self) -> type[PipelineSpec]:
        return _models(self.sections)[0]

    def step_model(self) -> type[StepSpec]:
        return _models(self.sections)[1]


NO_ENGINES = EngineSections()


@functools.cache
def _models(sections: tuple[tuple[str, EngineSection], ...]) -> tuple[type[PipelineSpec], type[StepSpec]]:
    """The document's models with the engines' blocks and step fields added (the neutral ones without any)."""
    if not sections:
        return PipelineSpec, StepSpec
    step_fields: dict[str, Any] = {}
    blocks: dict[str, Any] = {}
    for engine, section in sections:
        if section.step_fields is not None:
            declared = section.step_fields.model_fields
            step_fields.update((name, (info.annotation, info)) for name, info in declared.items())
        if section.block is not None:
            blocks[engine] = (section.block | None, Field(None, description=section.block_help or None))
    # an engine's step fields are placement, so they are listed (messages, schema) beside resources
    neutral = {name: (info.annotation, info) for name, info in StepSpec.model_fields.items()}
    at = list(neutral).index("resources") + 1
    ordered = dict([*list(neutral.items())[:at], *step_fields.items(), *list(neutral.items())[at:]])
    step = create_model("StepSpec", __base__=StepRules, __module__=StepSpec.__module__, **ordered)
    steps = PipelineSpec.model_fields["steps"]
    step_names = dict[Annotated[str, StringConstraints(pattern=STEP_NAME)], step]  # type: ignore[valid-type]
    pipeline = create_model(
        "PipelineSpec", __base__=PipelineSpec, __module__=PipelineSpec.__module__,
        steps=(step_names, Field(min_length=1, description=steps.description)), **blocks,
    )  # fmt: skip
    return pipeline, step  # type: ignore[return-value]  # a step model with StepSpec's fields and more
