"""The pipeline document as typed objects: the schema `dagflow schema` prints and validation enforces.

Field names follow the design card's YAML sketch exactly. Sizes and durations are normalised here
(memory_mb, timeout seconds) so nothing downstream parses units again.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    StringConstraints,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from dagflow.spec.units import DURATION_HELP, SIZE_HELP, parse_duration_s, parse_size_mb

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
STEP_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,63}$"
# Matrix values become parts of node names, file names and DAGMan lines, so they stay plain.
MATRIX_VALUE = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
MATRIX_VALUE_HELP = ("letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64 characters "
                     "(matrix values become node names and file names)")
OLD_OPTIMIZER_KEY = "engine"  # search.optimizer's deprecated name: it said nothing about where nodes run
# `params: {from_search: NAME}`: the params come from a finished search's best trial (per region with `per`);
# the key is no param itself.
FROM_SEARCH = "from_search"

_size_schema = {"anyOf": [{"type": "string", "description": SIZE_HELP}, {"type": "number"}]}
_duration_schema = {"anyOf": [{"type": "string", "description": DURATION_HELP}, {"type": "number"}]}

SizeMB = Annotated[int, BeforeValidator(parse_size_mb), WithJsonSchema(_size_schema)]
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER)]
MatrixValue = Annotated[
    str,
    BeforeValidator(lambda v: str(v).lower() if isinstance(v, bool) else str(v) if isinstance(v, int | float) else v),
    StringConstraints(pattern=MATRIX_VALUE),
]
ScalarValue = str | bool | int | float


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, defer_build=True)


AUTO = "auto"  # a resource learned from the pipeline's past runs at plan time (dagflow/run/resources/)


def _auto_or(parse: Any) -> Any:
    return lambda value: AUTO if value == AUTO else parse(value)


def _auto_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [*schema["anyOf"], {"const": AUTO, "description": "learned from past runs"}]}


AutoSizeMB = Annotated[
    int | Literal["auto"], BeforeValidator(_auto_or(parse_size_mb)), WithJsonSchema(_auto_schema(_size_schema))
]
AutoDurationS = Annotated[
    int | Literal["auto"],
    BeforeValidator(_auto_or(parse_duration_s)),
    WithJsonSchema(_auto_schema(_duration_schema)),
]


class ResourcesSpec(Strict):
    cpus: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(1, description="CPU cores, or auto")
    memory: AutoSizeMB = Field(1024, description=f"memory: {SIZE_HELP}, or auto (learned from past runs)")
    disk: SizeMB = Field(1024, description=f"scratch disk: {SIZE_HELP}")
    gpus: int = Field(0, ge=0, description="number of GPUs")
    gpu_memory: AutoSizeMB | None = Field(None, description="minimum memory per GPU, or auto")
    memory_max: SizeMB | None = Field(
        None,
        description="a node killed or held for exceeding its memory runs again with memory x memory_growth, "
        "up to this cap (such retries do not count against retries)",
    )
    memory_growth: float = Field(2.0, gt=1, le=16, description="the factor memory grows by on each such retry")
    cuda_capability: float | None = Field(None, gt=0, description="minimum CUDA compute capability, e.g. 8.0")
    gpu_class: str | None = Field(
        None, description="a GPU placement class from policies/gpu-classes.yaml, e.g. ampere-or-newer"
    )

    @model_validator(mode="after")
    def _memory_cap(self) -> ResourcesSpec:
        if self.memory_max is not None and self.memory != AUTO and self.memory_max < self.memory:
            raise ValueError(f"memory_max ({self.memory_max} MB) is below memory ({self.memory} MB)")
        return self


class RetrySpec(Strict):
    count: int = Field(0, ge=0, le=100, description="how many times to retry a failed node")
    unless_exit: list[int] = Field(
        default_factory=list, description="exit codes that mean 'do not retry' (a permanent failure)"
    )


class PromoteSpec(Strict):
    metric: str = Field(min_length=1, description="the metric to compare, a key of the step's metrics file")
    better: Literal["lower", "higher"] = Field(description="which way is better: lower (a loss) or higher")
    than: str = Field(
        description="the pointer to the current model, moved only when the new one is better, "
        "e.g. s3://bucket/models/{region}/latest"
    )
    model: str | None = Field(
        None, description="the step whose published model is promoted [default: the needed step with publish]"
    )
    min_delta: float = Field(0.0, ge=0, description="how much better the new metric must be")


CHECKPOINT_EXIT_CODE = 85  # ERESTART on Linux, the batch systems' usual "run me again" code
CHECKPOINT_MAX_RESTARTS = 1000


class CheckpointSpec(Strict):
    files: list[str] = Field(
        min_length=1,
        description="files or directories, relative to the job's directory, that hold the step's checkpoint: "
        "kept between restarts (where nothing is shared: sent back to the submitting machine at each "
        "checkpoint and to the next machine after an eviction)",
    )
    exit_code: int = Field(
        CHECKPOINT_EXIT_CODE,
        ge=1,
        le=255,
        description="the exit code that means 'checkpoint written, run me again' (not a failure: retries are "
        "untouched); must not be listed in retries.unless_exit",
    )
    max_restarts: int = Field(
        CHECKPOINT_MAX_RESTARTS,
        ge=1,
        le=1_000_000,
        description="after this many checkpoint restarts of one node, the next checkpoint exit counts as a "
        "failure, so a script that always exits with exit_code cannot loop for ever",
    )


class RuntimeSpec(Strict):
    python: str | None = Field(
        None,
        description="the interpreter on the execute node, an absolute path such as /opt/venv/bin/python: "
        "a command's `python`/`python3` runs it, and its directory comes first on PATH (so `dagflow` from "
        "the same environment is found) [default: the submitter's interpreter, at the same path]",
    )
    container_image: str | None = Field(
        None,
        description="run the step in this container image: docker://repo/image:tag, or an Apptainer .sif "
        "path",
    )


Row = dict[Identifier, MatrixValue]
_ROW_SCHEMA = {"type": "object", "additionalProperties": {"type": "string", "pattern": MATRIX_VALUE}}
# A step's `matrix:` as written: axes with their values, and `include:` rows or a values file (spec/value_files.py
# reads the file into rows before the schema sees it).
_STEP_MATRIX_SCHEMA = {
    "type": "object",
    "description": "the step's own fan-out, added to the pipeline's axes: AXIS: [values] (crossed), and "
    "include: explicit coordinate combinations, a list such as [{a: m1, b: m2}] or a CSV/JSON/YAML file "
    "beside the pipeline (one combination per row, its keys or header the axes)",
    "properties": {
        "include": {"anyOf": [{"type": "array", "items": _ROW_SCHEMA}, {"type": "string"}]},
    },
    "additionalProperties": {"type": "array", "items": {"type": "string", "pattern": MATRIX_VALUE}},
}
INCLUDE = "include"


class StepMatrixSpec(Strict):
    """A step's own coordinates: the product of `axes`, then the `include` rows (written as one mapping,
    `{AXIS: [values], include: [...]}`, which the validator below splits)."""

    axes: dict[Identifier, list[MatrixValue]] = Field(default_factory=dict)
    include: list[Row] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _split(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        return {"axes": {k: v for k, v in data.items() if k != INCLUDE}, INCLUDE: data.get(INCLUDE, [])}

    @model_validator(mode="after")
    def _combinations(self) -> StepMatrixSpec:
        if not self.axes and not self.include:
            raise ValueError("a step's matrix needs an axis (AXIS: [values]) or include rows")
        for axis, values in self.axes.items():
            if not values:
                raise ValueError(f"axis {axis!r} has no values")
            if len(set(values)) != len(values):
                raise ValueError(f"axis {axis!r} lists a value twice")
        names = list(self.axes) or list(self.include[0])
        seen: set[tuple[str, ...]] = set()
        for number, row in enumerate(self.include, 1):
            if not row:
                raise ValueError(f"include row {number} is empty")
            if set(row) != set(names):
                raise ValueError(f"include row {number} names {', '.join(row)}, but "
                                 f"{'the axes are' if self.axes else 'row 1 names'} {', '.join(names)}")
            key = tuple(row[name] for name in names)
            if key in seen:
                raise ValueError(f"include row {number} repeats an earlier combination: {_pairs(row)}")
            seen.add(key)
        return self

    @property
    def names(self) -> tuple[str, ...]:
        """The step's own axes, in order."""
        return tuple(self.axes) or tuple(self.include[0])

    def combinations(self) -> list[tuple[str, ...]]:
        """Each of the step's own coordinate combinations, as values in `names` order."""
        names = self.names
        crossed = list(itertools.product(*self.axes.values())) if self.axes else []
        return crossed + [tuple(row[name] for name in names) for row in self.include]


def fan_out_axes(pipeline: Iterable[str], over: Collection[str], own: Sequence[str]) -> tuple[str, ...]:
    """The axes a step fans out over: the pipeline's it neither gathers over nor names in its own matrix, then
    its own. The one rule: the plan's expansion and validation of the document as written both use it."""
    return (*(axis for axis in pipeline if axis not in over and axis not in own), *own)


def _pairs(row: Mapping[str, str]) -> str:
    return ", ".join(f"{key}={value}" for key, value in row.items())


class NeedSpec(Strict):
    step: str = Field(description="the step needed")
    match: dict[Identifier, str | list[str]] = Field(
        default_factory=dict,
        description="which of its nodes: AXIS of the needed step -> a value, or a list of values, written with "
        "this step's coordinates, e.g. {image: ['{a}', '{b}']}; the axes both steps share and match leaves out "
        "must agree as with a plain need",
    )


def _retry_from_int(value: Any) -> Any:
    return {"count": value} if isinstance(value, int) and not isinstance(value, bool) else value


class StepRules(Strict):
    """What a step must satisfy as a whole: the base of StepSpec and of a step with the engines' fields
    (spec/sections.py), whose fields are StepSpec's."""

    @model_validator(mode="after")
    def _kind_fields(self) -> StepRules:
        step: Any = self  # a StepSpec, or a step with the engines' fields
        if step.kind == "transfer":
            missing = [name for name, value in (("from", step.from_), ("to", step.to)) if not value]
            if missing:
                raise ValueError(f"a transfer step needs {' and '.join(missing)}")
            if step.command is not None:
                raise ValueError("a transfer step takes from/to, not command")
        else:
            if step.command is None or step.command == [] or step.command == "":
                raise ValueError(f"a {step.kind} step needs a command")
            if step.from_ is not None or step.to is not None:
                raise ValueError("from/to belong to transfer steps (kind: transfer)")
        return self

    @property
    def needed_steps(self) -> list[str]:
        """The steps this step needs, each once, in the order first named."""
        needs: list[Any] = self.needs  # type: ignore[attr-defined]  # StepSpec's field
        return list(dict.fromkeys(need if isinstance(need, str) else need.step for need in needs))


# A step's neutral fields; the engines' own step fields are added to them (spec/sections.py).
class StepSpec(StepRules):
    kind: Literal["transfer", "train", "evaluate", "command"] = Field(
        "command", description="what the step does; transfer steps move data with from/to"
    )
    description: str | None = None
    needs: list[str | NeedSpec] = Field(
        default_factory=list,
        description="steps that must finish first: a step name (its nodes with the same coordinates on the "
        "axes both share), or {step: NAME, match: {AXIS: '{coordinate}'}} for the nodes whose coordinates "
        "this node names",
    )
    matrix: Annotated[StepMatrixSpec | None, WithJsonSchema(_STEP_MATRIX_SCHEMA)] = Field(
        None, description=_STEP_MATRIX_SCHEMA["description"]
    )
    over: list[str] = Field(
        default_factory=list,
        description="matrix axes this step gathers across: one node for all their values",
    )
    command: str | list[str] | None = Field(
        None,
        description="program and arguments (split like a shell would, but no shell operators; "
        "use [sh, -c, '...'] for a shell). {inputs} and {outputs} as a whole word are one word per path; "
        "{inputs[0]}, {outputs[1]} one path; inside a longer word (sh -c '...') paths are shell-quoted and "
        "a list joined by spaces",
    )
    from_: str | None = Field(None, alias="from", description="transfer source: a path or s3://bucket/prefix")
    to: str | None = Field(None, description="transfer destination: a path or s3://bucket/prefix")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)  # type: ignore[arg-type]
    env: dict[Annotated[str, StringConstraints(pattern=IDENTIFIER)], str | int | float | bool] = Field(
        default_factory=dict
    )
    retries: Annotated[RetrySpec, BeforeValidator(_retry_from_int)] = Field(
        default_factory=RetrySpec,  # type: ignore[arg-type]
        description="a retry count, or {count, unless_exit: [codes]}",
    )
    timeout: AutoDurationS | None = Field(
        None, description=f"kill the node after this long: {DURATION_HELP}, or auto (learned from past runs)"
    )
    priority: int = Field(0, description="higher runs first among ready nodes")
    inputs: list[str] = Field(default_factory=list, description="files or directories the step reads (for caching)")
    outputs: list[str] = Field(default_factory=list, description="files or directories the step writes")
    metrics: str | None = Field(None, description="JSON file of metrics the step writes (read by search)")
    publish: str | None = Field(
        None,
        description="train steps: upload the step's outputs here after it succeeds, "
        "e.g. s3://bucket/models/{region}/{run.id}/",
    )
    promote_if: PromoteSpec | None = Field(
        None, description="evaluate steps: move the `than` pointer to the published model only when it is better"
    )
    runtime: RuntimeSpec | None = Field(
        None, description="what runs the step on the execute node (overrides the pipeline's runtime per key)"
    )
    checkpoint: CheckpointSpec | None = Field(
        None,
        description="a self-checkpointing step: {files: [...], exit_code: 85}. A node exiting with exit_code is "
        "run again at once with its checkpoint files kept, and that does not count as a failed attempt",
    )


class ObjectiveSpec(Strict):
    metric: str
    goal: Literal["minimize", "maximize"] = "minimize"


# Past these a search space is no longer one the optimisers can model (nor its params one argv).
MAX_VARIABLE_SIZE = 1000
MAX_DIMENSIONS = 1000


class VariableSpec(Strict):
    type: Literal["FLOAT", "INT", "ENUM"]
    min: float | None = None
    max: float | None = None
    scale: Literal["linear", "log"] = "linear"
    options: list[ScalarValue] | None = None
    size: int = Field(1, ge=1)

    @field_validator("min", "max")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError(f"a bound must be a finite number, not {value}")
        return value

    @field_validator("size")
    @classmethod
    def _not_absurd(cls, value: int) -> int:
        if value > MAX_VARIABLE_SIZE:
            raise ValueError(f"size must be at most {MAX_VARIABLE_SIZE}, not {value}")
        return value

    @property
    def dimensions(self) -> int:
        """The optimisers' coordinates this variable takes: one per element, per option of an ENUM's."""
        return self.size * (len(self.options or ()) if self.type == "ENUM" else 1)

    @model_validator(mode="after")
    def _bounds(self) -> VariableSpec:
        if self.type == "ENUM":
            if not self.options:
                raise ValueError("an ENUM variable needs options")
        else:
            if self.min is None or self.max is None:
                raise ValueError(f"a {self.type} variable needs min and max")
            if self.min >= self.max:
                raise ValueError("min must be less than max")
            if self.scale == "log" and self.min <= 0:
                raise ValueError("a log-scale variable needs min > 0")
        return self


class EarlyStoppingSpec(Strict):
    rule: Literal["median", "asha"] = Field(description="median stopping, or asynchronous successive halving")
    min_steps: int = Field(1, ge=1, description="no trial is stopped before it reported this step (asha: rung 0)")
    min_trials: int = Field(
        3, ge=1, description="other trials that must have reported a step before a trial is compared at it"
    )
    reduction_factor: float | None = Field(
        None, gt=1, description="asha: rungs at min_steps * factor^k keep the top 1/factor [default 3]"
    )
    max_steps: int | None = Field(None, ge=1, description="asha: the last step of a full trial (no rung from it on)")


class SearchSpec(Strict):
    objective: ObjectiveSpec
    variables: dict[Identifier, VariableSpec] = Field(min_length=1)
    budget: int = Field(20, ge=1)
    parallel: int = Field(1, ge=1)
    batch: bool = Field(
        False,
        description="suggest `parallel` trials at once and the next ones only when all of them have ended "
        "(synchronous batches) [default: a new trial whenever one ends]",
    )
    serial_tail: int = Field(
        0,
        ge=0,
        description="run the last N trials (per region) one at a time, each chosen knowing every earlier result: "
        "a fixed budget ends on better points, at the price of idle slots [default 0: off]",
    )
    per: Identifier | None = Field(None, description="a matrix axis to run one search per value of, e.g. region")
    optimizer: str = Field("gp", description="optimiser: gp (default) or random (formerly `engine`)")
    early_stopping: EarlyStoppingSpec | None = Field(
        None, description="stop trials whose intermediate metrics (one JSON line per step) trail the others'"
    )

    @model_validator(mode="before")
    @classmethod
    def _old_optimizer_key(cls, data: Any) -> Any:
        """`engine:` is the optimiser's old name (validation warns that it is deprecated)."""
        if not isinstance(data, dict) or OLD_OPTIMIZER_KEY not in data:
            return data
        if "optimizer" in data:
            raise ValueError(f"give optimizer only: {OLD_OPTIMIZER_KEY} is its deprecated old name")
        data = dict(data)
        data["optimizer"] = data.pop(OLD_OPTIMIZER_KEY)
        return data

    @field_validator("variables")
    @classmethod
    def _modelled(cls, variables: dict[str, VariableSpec]) -> dict[str, VariableSpec]:
        if (problem := too_many_dimensions(variables)) is not None:
            raise ValueError(problem)
        return variables


def too_many_dimensions(variables: Mapping[str, VariableSpec]) -> str | None:
    """Why the variables make a space too large for the optimisers, or None."""
    dimensions = sum(spec.dimensions for spec in variables.values())
    if dimensions <= MAX_DIMENSIONS:
        return None
    return (
        f"{dimensions} dimensions in all (each element of a variable, each option of an ENUM's): "
        f"dagflow's optimisers take at most {MAX_DIMENSIONS}"
    )


class ScheduleSpec(Strict):
    cron: str = Field(description="five-field cron expression, e.g. '0 3 * * *'")
    per: Identifier | None = Field(None, description="a matrix axis to install one schedule per value of")


# The document's neutral blocks; each engine's own block is added under its name (spec/sections.py).
class PipelineSpec(Strict):
    name: Annotated[str, StringConstraints(pattern=STEP_NAME)]
    description: str | None = None
    matrix: dict[Identifier, list[MatrixValue]] = Field(
        default_factory=dict, description="fan-out axes, e.g. region: [us, br, de, jp]"
    )
    params: dict[Identifier, ScalarValue] = Field(
        default_factory=dict,
        description="defaults templates can use as {params.NAME}; `from_search: NAME` takes them from a finished "
        "search's best trial (that region's, for a per-region search)",
    )
    steps: dict[Annotated[str, StringConstraints(pattern=STEP_NAME)], StepSpec] = Field(min_length=1)
    search: SearchSpec | None = None
    schedule: ScheduleSpec | None = None
    runtime: RuntimeSpec | None = Field(
        None, description="what runs every step on the execute node: {python: PATH} or {container_image: IMAGE}"
    )
    _from_search: str | None = PrivateAttr(None)

    @model_validator(mode="wrap")
    @classmethod
    def _params_from_search(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        """`params.from_search` is kept apart from the params (validation checks its value)."""
        taken = None
        if isinstance(data, dict) and isinstance(data.get("params"), dict) and FROM_SEARCH in data["params"]:
            params = dict(data["params"])
            taken = params.pop(FROM_SEARCH)
            data = {**data, "params": params}
        model = handler(data)
        model._from_search = taken if isinstance(taken, str) else None
        return model

    @property
    def from_search(self) -> str | None:
        """The search whose best params this pipeline runs with (`params: {from_search: NAME}`), or None."""
        return self._from_search
