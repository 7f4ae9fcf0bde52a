"""check_document(): every check of a pipeline document, reporting every problem at once.

Schema checks come from the pydantic model; the checks that need the whole document (references
between steps, cycles, templates) run here on the raw data, guarded so that one malformed part never
hides the problems in another. An engine's own block and step fields (spec/sections.py) are validated with
the document, against the models the engine declares; what else they must satisfy is that engine's to check,
in its declared spec check (engines/base.py EngineDeclaration.spec_check), which load_spec runs (spec/load.py).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dagflow.errors import Diagnostic, closest
from dagflow.gpu_memory import GPU_MEMORY
from dagflow.policies import gpu_classes
from dagflow.spec.command_files import missing_scripts
from dagflow.spec.model import (
    CHECKPOINT_EXIT_CODE,
    FROM_SEARCH,
    INCLUDE,
    MATRIX_VALUE_HELP,
    OLD_OPTIMIZER_KEY,
    CheckpointSpec,
    NeedSpec,
    PipelineSpec,
    PromoteSpec,
    ResourcesSpec,
    RetrySpec,
    RuntimeSpec,
    ScheduleSpec,
    SearchSpec,
    StepSpec,
    VariableSpec,
    fan_out_axes,
)
from dagflow.spec.schema_messages import schema_message
from dagflow.spec.sections import NO_ENGINES, EngineSections
from dagflow.spec.sharing import undeclared_sharing
from dagflow.spec.templates import FILE_FIELDS, FILE_VARIABLE, TemplateError, parse_template
from dagflow.spec.units import DURATION_HELP, SIZE_HELP
from dagflow.spec.value_files import ValueFileError, read_rows
from dagflow.spec.yamlpos import Path_, Positions, dotted
from dagflow.text import CONTROL_CHARACTERS
from dagflow.transfer.s3url import S3LocationError, parse_s3_url

BUILTIN_VARIABLES = ("run.id", "step", "pipeline")
# dagflow sets DAGFLOW_RUN_ID, DAGFLOW_NODE, ... in every node's environment and finds its own nodes by them.
RESERVED_ENV_PREFIX = "DAGFLOW_"
SHELL_OPERATORS = frozenset({"|", "||", "&&", ";", ">", ">>", "<", "<<", "&", "2>", "2>&1", "&>"})
CONTROL_CHARACTERS_MESSAGE = "control characters (such as a newline) are not allowed in this value"
CONTROL_CHARACTERS_HINT = "they cannot be passed safely to batch systems"

# Field names allowed at each level of the document, for "did you mean" hints on unknown keys (the document
# and a step as the engines' sections extend them: _allowed_fields).
_MODELS_BY_PATTERN: dict[tuple[str, ...], type] = {
    (): PipelineSpec,
    ("steps", "*"): StepSpec,
    ("steps", "*", "resources"): ResourcesSpec,
    ("steps", "*", "retries"): RetrySpec,
    ("steps", "*", "promote_if"): PromoteSpec,
    ("steps", "*", "checkpoint"): CheckpointSpec,
    ("steps", "*", "needs", "*"): NeedSpec,
    ("search",): SearchSpec,
    ("search", "variables", "*"): VariableSpec,
    ("schedule",): ScheduleSpec,
}
_UNIT_FIELDS = {"memory": SIZE_HELP, "disk": SIZE_HELP, "gpu_memory": SIZE_HELP, "timeout": DURATION_HELP}
_PATTERN_HELP = {
    "matrix": MATRIX_VALUE_HELP,
    "steps": "a letter, then letters, digits, '_' or '-', at most 64 characters",
    "name": "a letter, then letters, digits, '_' or '-', at most 64 characters",
}


@dataclass(slots=True)
class Checked:
    """What checking one parsed document found: the model (None when the schema failed) and every problem."""

    model: PipelineSpec | None
    diagnostics: list[Diagnostic]
    warnings: list[Diagnostic]


def check_document(
    data: Any, positions: Positions, filename: str, base: Path | None, engines: EngineSections = NO_ENGINES
) -> Checked:
    """Every check of a parsed pipeline document; `base` is the pipeline's directory (for relative paths),
    `engines` what the engines add to the document (their blocks and step fields)."""
    if not isinstance(data, dict):
        problem = Diagnostic(filename, 1, 1, "", "a pipeline file must be a mapping (name:, steps:, ...)")
        return Checked(None, [problem], [])
    checker = _Checker(filename, positions, engines)
    checker.base = base
    data = checker.value_files(data)
    model = checker.schema(data)
    checker.semantics(data)
    if model is not None:
        checker.diagnostics += runtime_errors(model, positions, filename)
        checker.warnings += undeclared_sharing(model.steps, positions.of, filename)
        checker.warnings += missing_scripts(model, positions.of, filename, base)
    return Checked(model, checker.diagnostics, checker.warnings)


def _allowed_fields(path: Path_, engines: EngineSections) -> list[str]:
    extended = {(): engines.pipeline_model(), ("steps", "*"): engines.step_model()}
    for pattern, model in {**_MODELS_BY_PATTERN, **extended}.items():
        if len(pattern) == len(path) and all(p in ("*", q) for p, q in zip(pattern, path, strict=True)):
            return [field.alias or name for name, field in model.model_fields.items()]
    return []


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[Path_, bool]:
    """Map a pydantic error location onto the document; union-member tags are dropped.

    Returns the path and whether the error is about a mapping key rather than its value.
    """
    path: list[str | int] = []
    current = data
    for part in loc:
        if part == "[key]":
            return tuple(path), True
        in_mapping = isinstance(current, dict) and isinstance(part, str) and part in current
        in_list = isinstance(current, list) and isinstance(part, int) and 0 <= part < len(current)
        if in_mapping or in_list:
            current = current[part]
            path.append(part)
    return tuple(path), False


class _Checker:
    def __init__(self, filename: str, positions: Positions, engines: EngineSections) -> None:
        self.filename = filename
        self.positions = positions
        self.engines = engines
        self.diagnostics: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.base: Path | None = None  # the pipeline's directory, where checkpoint paths must stay
        self.unread: set[str] = set()  # steps whose values file could not be read: their axes are unknown

    def value_files(self, data: dict[str, Any]) -> dict[str, Any]:
        """data with each step's `matrix: {include: FILE}` replaced by the file's rows (a step whose file
        cannot be read loses its matrix, and the problem is reported at the file's name)."""
        steps = data.get("steps")
        if not isinstance(steps, dict):
            return data
        replaced = dict(steps)
        for name, step in steps.items():
            step_matrix = step.get("matrix") if isinstance(step, dict) else None
            if not isinstance(step_matrix, dict) or not isinstance(step_matrix.get(INCLUDE), str):
                continue
            shown = step_matrix[INCLUDE]
            try:
                rows = read_rows((self.base or Path.cwd()) / shown, shown)
            except ValueFileError as exc:
                self.add(("steps", name, "matrix", INCLUDE), str(exc))
                self.unread.add(str(name))
                replaced[name] = {key: value for key, value in step.items() if key != "matrix"}
                continue
            replaced[name] = {**step, "matrix": {**step_matrix, INCLUDE: rows}}
        return {**data, "steps": replaced}

    def add(self, path: Path_, message: str, *, allowed: str | None = None, hint: str | None = None,
            key: bool = False) -> None:
        line, column = self.positions.of(path, key=key)
        self.diagnostics.append(Diagnostic(self.filename, line, column, dotted(path), message, allowed, hint))

    # -- schema ----------------------------------------------------------------------------------

    def schema(self, data: dict[str, Any]) -> PipelineSpec | None:
        try:
            return self.engines.pipeline_model().model_validate(data)
        except ValidationError as exc:
            self._schema_errors(data, exc.errors(include_url=False))
            return None

    def _schema_errors(self, data: dict[str, Any], errors: list[Any]) -> None:
        by_path: dict[tuple[Path_, bool], list[Any]] = {}
        for error in errors:
            if error["type"] == "extra_forbidden":
                path, _ = _data_path(data, error["loc"])
                allowed = _allowed_fields(path[:-1], self.engines)
                self.add(path, f"unknown key {path[-1]!r}", allowed=", ".join(allowed) or None,
                         hint=_meant(str(path[-1]), allowed), key=True)
                continue
            by_path.setdefault(_data_path(data, error["loc"]), []).append(error)
        for (path, is_key), group in by_path.items():
            hint = None
            literal = next((error for error in group if error["type"] == "literal_error"), None)
            if literal is not None and isinstance(literal["input"], str):
                hint = closest(literal["input"], re.findall(r"'([^']*)'", literal["ctx"]["expected"]))
            field = next((p for p in reversed(path) if isinstance(p, str)), "")
            allowed = _UNIT_FIELDS.get(field) if field == (path[-1] if path else None) else None
            if any(error["type"] == "string_pattern_mismatch" for error in group):
                allowed = _PATTERN_HELP.get(str(path[0]) if path else "", allowed)
            message = schema_message(group, path, self.engines.examples())
            self.add(path, message, allowed=allowed, hint=hint, key=is_key)

    # -- whole-document checks -------------------------------------------------------------------

    def semantics(self, data: dict[str, Any]) -> None:
        matrix = data.get("matrix") if isinstance(data.get("matrix"), dict) else {}
        params = data.get("params") if isinstance(data.get("params"), dict) else {}
        steps = data.get("steps") if isinstance(data.get("steps"), dict) else {}
        search = data.get("search") if isinstance(data.get("search"), dict) else {}
        self._matrix(matrix)
        self._control_chars(("params",), params)
        search_vars = search.get("variables") if isinstance(search.get("variables"), dict) else {}
        self._from_search(params)
        param_names = {str(name) for name in params if name != FROM_SEARCH}
        self._search_defaults(search_vars, param_names)
        if OLD_OPTIMIZER_KEY in search:
            line, column = self.positions.of(("search", OLD_OPTIMIZER_KEY), key=True)
            self.warnings.append(Diagnostic(
                self.filename, line, column, f"search.{OLD_OPTIMIZER_KEY}",
                f"search.{OLD_OPTIMIZER_KEY} is deprecated: the optimiser is now set with optimizer",
                hint=f"write optimizer: {search[OLD_OPTIMIZER_KEY]}",
            ))
        for holder, field in ((search, "per"), (data.get("schedule") or {}, "per")):
            if isinstance(holder, dict) and isinstance(holder.get(field), str) and holder[field] not in matrix:
                section = "search" if holder is search else "schedule"
                self.add((section, field), f"{holder[field]!r} is not a matrix axis",
                         allowed=", ".join(matrix) or "no matrix axes are defined",
                         hint=closest(holder[field], matrix))
        for name, step in steps.items():
            if isinstance(step, dict):
                self._step(str(name), step, steps, matrix, param_names)
                self._publish(str(name), step)
                self._promote(str(name), step, steps, matrix)
                self._checkpoint(str(name), step, params)
        self._cycles(steps)
        self._cron(data.get("schedule"))

    def _cron(self, schedule: Any) -> None:
        if not isinstance(schedule, dict) or not isinstance(schedule.get("cron"), str):
            return
        from dagflow.spec.cron import FORM, CronError, normalize  # cronsim: for a pipeline with a schedule only

        try:
            normalize(schedule["cron"])
        except CronError as exc:
            self.add(("schedule", "cron"), str(exc), allowed=FORM)

    def _publish(self, name: str, step: dict[str, Any]) -> None:
        publish = step.get("publish")
        if not isinstance(publish, str):
            return
        path: Path_ = ("steps", name, "publish")
        if step.get("kind") != "train":
            self.add(path, "publish belongs to train steps (kind: train)")
        if not _as_list(step.get("outputs")):
            self.add(path, "publish uploads the step's outputs, but the step lists none",
                     hint="list the files or directories it writes under outputs")
        self._location(path, publish, prefix=True)

    def _location(self, path: Path_, text: str, *, prefix: bool) -> None:
        """An s3:// URL or a path; a prefix (a directory) ends with '/', an object does not."""
        literal = text.replace("{{", "").replace("}}", "")
        if literal.lower().startswith("s3://"):
            rendered = re.sub(r"\{[^{}]*\}", "x", literal)  # any value a variable could take
            try:
                parse_s3_url(rendered)
            except S3LocationError as exc:
                self.add(path, str(exc).replace(rendered, text))
                return
        if prefix and not text.endswith("/"):
            self.add(path, f"{text!r} is a file name; this must be a directory or prefix",
                     hint=f"end it with '/': {text}/")
        elif not prefix and text.endswith("/"):
            self.add(path, f"{text!r} is a directory; the pointer is one file or object",
                     hint=f"e.g. {text}latest")

    def _promote(self, name: str, step: dict[str, Any], steps: dict[str, Any], matrix: dict[str, Any]) -> None:
        promote = step.get("promote_if")
        if not isinstance(promote, dict):
            return
        base: Path_ = ("steps", name, "promote_if")
        if step.get("kind") != "evaluate":
            self.add(base, "promote_if belongs to evaluate steps (kind: evaluate)", key=True)
        if not isinstance(step.get("metrics"), str):
            self.add(base, "promote_if reads the new model's metric from the step's metrics file, "
                     "but the step has no metrics", hint="add metrics: path/to/metrics.json", key=True)
        than = promote.get("than")
        if isinstance(than, str):
            self._location((*base, "than"), than, prefix=False)
            if "run.id" in _variables(than):
                self.add((*base, "than"), "the pointer must be the same for every run, but it uses {run.id}",
                         hint="e.g. s3://bucket/models/{region}/latest")
        needs = [need for need in _need_names(step) if need in steps]
        publishers = [need for need in needs if isinstance(steps[need], dict) and steps[need].get("publish")]
        model = promote.get("model")
        if isinstance(model, str):
            if model not in needs:
                self.add((*base, "model"), f"model names {model!r}, which this step does not need",
                         allowed=", ".join(needs) or "no steps: add needs", hint=closest(model, needs))
                return
            if model not in publishers:
                self.add((*base, "model"), f"step {model!r} publishes nothing", hint=f"add publish: to {model}")
                return
        elif len(publishers) != 1:
            message = (f"needed steps {', '.join(publishers)} all publish a model: say which one is promoted"
                       if publishers else "promotion needs a published model, but no needed step has publish")
            self.add(base, message, allowed="model: STEP, a needed step with publish" if publishers else None,
                     hint=None if publishers else "add publish: s3://bucket/models/{region}/{run.id}/ to the "
                     "train step this step needs", key=True)
            return
        else:
            model = publishers[0]
        self._publish_per_run(model, steps[model], name)
        model_over = set(_over_axes(steps[model]))
        own_over = set(_over_axes(step))
        spread = sorted(axis for axis in own_over - model_over if axis in matrix)
        if spread:
            self.add(base, f"this step gathers over {', '.join(spread)} but step {model!r} publishes one model "
                     "per value: there would be several models to promote", key=True)

    def _publish_per_run(self, name: str, step: dict[str, Any], promoter: str) -> None:
        """A promoted model is published to a prefix of its own run: with one shared prefix, a later
        run's publish overwrites the promoted model before its gate runs, and a gate that keeps the
        old model leaves the pointer (with the old metrics) naming the new, worse files."""
        publish = step.get("publish")
        if not isinstance(publish, str) or "run.id" in _variables(publish):
            return
        fixed = publish.rstrip("/") + "/{run.id}/"
        self.add(("steps", name, "publish"), f"step {promoter!r} promotes this model, so each run must publish "
                 "to a prefix of its own: without {run.id} the next run's publish overwrites the promoted model "
                 "before its promotion is decided", hint=f"add {{run.id}}: {fixed}")

    def _checkpoint(self, name: str, step: dict[str, Any], params: dict[str, Any]) -> None:
        checkpoint = step.get("checkpoint")
        if not isinstance(checkpoint, dict):
            return
        base: Path_ = ("steps", name, "checkpoint")
        if step.get("kind") == "transfer":
            self.add(base, "a transfer step cannot checkpoint: it runs dagflow's own copy, which resumes by itself",
                     hint="put checkpoint: on the train step", key=True)
        for index, item in enumerate(_as_list(checkpoint.get("files"))):
            if isinstance(item, str):
                self._checkpoint_file((*base, "files", index), item, params)
        code = checkpoint.get("exit_code", CHECKPOINT_EXIT_CODE)
        retries = step.get("retries")
        unless = _as_list(retries.get("unless_exit")) if isinstance(retries, dict) else []
        if isinstance(code, int) and code in unless:
            self.add((*base, "exit_code") if "exit_code" in checkpoint else base,
                     f"checkpoint exit code {code} is also in retries.unless_exit: the same exit cannot mean both "
                     "'run me again' and 'permanent failure'",
                     hint="pick another checkpoint exit_code, or drop it from unless_exit",
                     key="exit_code" not in checkpoint)

    def _checkpoint_file(self, path: Path_, text: str, params: dict[str, Any]) -> None:
        """A checkpoint file stays inside the job's directory: an engine that shares nothing sends it back and
        forth relative to it."""
        rendered = text.replace("{{", "{").replace("}}", "}")
        for param, value in params.items():  # a param's default reaches the path as written
            rendered = rendered.replace(f"{{params.{param}}}", str(value))
        rendered = re.sub(r"\{[^{}]*\}", "x", rendered)  # matrix values cannot hold '/' or be '..'
        if not rendered.strip():
            self.add(path, "a checkpoint file name is empty")
            return
        if re.search(r"[\s,\"']", rendered):
            self.add(path, f"{text!r}: checkpoint file names cannot hold spaces, commas or quotes",
                     hint="the list of checkpoint files a batch system sends cannot carry them")
        normal = posixpath.normpath(rendered)
        if rendered.startswith(("/", "~")):
            self.add(path, f"{text!r} is an absolute path; a checkpoint file is relative to the job's directory",
                     hint="e.g. checkpoints/state.pt")
        elif normal == "." or normal == ".." or normal.startswith("../"):
            self.add(path, f"{text!r} escapes the job's directory; a checkpoint file must lie inside it",
                     hint="e.g. checkpoints/state.pt")
        elif self.base is not None and not _inside(self.base, normal):
            self.add(path, f"{text!r} resolves outside the job's directory (through a symbolic link)",
                     hint="name the file inside the pipeline's directory")

    def _from_search(self, params: dict[str, Any]) -> None:
        if FROM_SEARCH in params and (not isinstance(params[FROM_SEARCH], str) or not params[FROM_SEARCH].strip()):
            self.add(("params", FROM_SEARCH), f"{FROM_SEARCH} names a search: expected its name, not "
                     f"{params[FROM_SEARCH]!r}", hint="e.g. from_search: nightly (`dagflow search status` lists them)")

    def _search_defaults(self, search_vars: dict[str, Any], param_names: set[str]) -> None:
        for name in search_vars:
            if str(name) not in param_names:
                self.add(("search", "variables", name), f"search variable {name!r} has no default in params",
                         hint=f"add {name} to params: a plain run uses the default, a search overrides it per trial",
                         key=True)

    def _matrix(self, matrix: dict[str, Any]) -> None:
        for axis, values in matrix.items():
            if isinstance(values, list):
                if not values:
                    self.add(("matrix", axis), f"matrix axis {axis!r} has no values",
                             allowed="a non-empty list, e.g. [us, br]")
                seen: set[str] = set()
                for index, value in enumerate(values):
                    if str(value) in seen:
                        self.add(("matrix", axis, index), f"duplicate value {value!r} in axis {axis!r}")
                    seen.add(str(value))

    def _step(self, name: str, step: dict[str, Any], steps: dict[str, Any], matrix: dict[str, Any],
              param_names: set[str]) -> None:
        base: Path_ = ("steps", name)
        over = _over_axes(step)
        for index, axis in enumerate(_as_list(step.get("over"))):
            if isinstance(axis, str) and axis not in matrix:
                self.add((*base, "over", index), f"over names {axis!r}, which is not a matrix axis",
                         allowed=", ".join(matrix) or "no matrix axes are defined", hint=closest(axis, matrix))
            elif isinstance(axis, str) and axis in _own_axes(step):
                self.add((*base, "over", index), f"the step's own matrix fans out over {axis!r}: it cannot also "
                         "gather over it")
        axes = step_axes(step, matrix)
        variables = {*axes, *BUILTIN_VARIABLES, *(f"params.{p}" for p in param_names)}
        self._needs(name, step, steps, matrix, variables)
        if name in self.unread:
            return  # its axes are unknown: its templates would only repeat that its values file is bad
        gathered = {axis for axis in over if axis in matrix}
        gpu = {GPU_MEMORY} if _requests_gpus(step) else set()
        files = _file_variables(step)
        for path, text in _template_fields(base, step):
            allowed = variables | gpu if path[2] in _GPU_MEMORY_FIELDS else variables
            self._template(path, text, allowed | files if path[2] == "command" else allowed, gathered)
            if path != (*base, "command"):  # a command string's newlines only separate arguments
                self._no_control_chars(path, text)
        self._command(base, step.get("command"))
        self._env_names(base, step.get("env"))
        self._resources(base, step.get("resources"))

    def _needs(self, name: str, step: dict[str, Any], steps: dict[str, Any], matrix: dict[str, Any],
               variables: set[str]) -> None:
        base: Path_ = ("steps", name, "needs")
        for index, need in enumerate(_as_list(step.get("needs"))):
            needed = need.get("step") if isinstance(need, dict) else need
            where = (*base, index, "step") if isinstance(need, dict) else (*base, index)
            if not isinstance(needed, str):
                continue  # the schema says what it must be
            if needed not in steps:
                self.add(where, f"needs {needed!r}, but there is no step of that name",
                         allowed=", ".join(s for s in steps if s != name), hint=closest(needed, steps))
                continue
            if needed == name:
                self.add(where, "a step cannot need itself")
                continue
            match = need.get("match") if isinstance(need, dict) else None
            if not isinstance(match, dict) or not isinstance(steps[needed], dict):
                continue
            their_axes = step_axes(steps[needed], matrix)
            for axis, values in match.items():
                if axis not in their_axes:
                    self.add((*base, index, "match", axis), f"match names {axis!r}, which is not an axis of step "
                             f"{needed!r}", allowed=", ".join(their_axes) or f"none: step {needed!r} does not fan "
                             "out", hint=closest(str(axis), their_axes), key=True)
                    continue
                located = [((*base, index, "match", axis, i), v) for i, v in enumerate(_as_list(values))] if (
                    isinstance(values, list)) else [((*base, index, "match", axis), values)]
                for path, value in located:
                    if isinstance(value, str) and name not in self.unread:
                        self._template(path, value, variables, set())

    def _template(self, path: Path_, text: str, variables: set[str], gathered: set[str]) -> None:
        try:
            template = parse_template(text)
        except TemplateError as exc:
            self.add(path, str(exc))
            return
        for variable in template.variables:
            if variable in variables:
                continue
            if variable == GPU_MEMORY:
                self.add(path, f"{{{GPU_MEMORY}}} is the memory of the GPU the node gets: it is only known in "
                         "the command and env of a step that requests GPUs", hint="add gpus: 1 (or more)")
            elif FILE_VARIABLE.match(variable):
                self.add(path, f"{{{variable}}} names the step's input or output files: it can be used in the "
                         "command only, with an index below the number of paths listed",
                         allowed=", ".join(f"{{{v}}}" for v in sorted(variables)))
            elif variable in gathered:
                self.add(path, f"{{{variable}}} has no single value in a step that gathers over {variable!r}",
                         allowed=", ".join(f"{{{v}}}" for v in sorted(variables)))
            else:
                self.add(path, f"unknown template variable {{{variable}}}",
                         allowed=", ".join(f"{{{v}}}" for v in sorted(variables)),
                         hint=closest(variable, variables))

    def _command(self, base: Path_, command: Any) -> None:
        """A command string is split like a shell would; an explicit argv list is taken literally."""
        if not isinstance(command, str):
            return
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            self.add((*base, "command"), f"cannot split the command into arguments: {exc}")
            return
        for arg in argv:
            self._no_control_chars((*base, "command"), arg)
        operators = sorted({arg for arg in argv if arg in SHELL_OPERATORS})
        if operators:
            self.add((*base, "command"), f"shell operators {', '.join(operators)} are not interpreted here",
                     hint="the command runs without a shell; write command: [sh, -c, '...'] to use one")

    def _env_names(self, base: Path_, env: Any) -> None:
        if not isinstance(env, dict):
            return
        for key in env:
            if str(key).startswith(RESERVED_ENV_PREFIX):
                self.add((*base, "env", key),
                         f"{key!r}: names starting with {RESERVED_ENV_PREFIX} are reserved for dagflow, which sets "
                         "them in every node's environment",
                         allowed=f"any name not starting with {RESERVED_ENV_PREFIX}", key=True)

    def _resources(self, base: Path_, resources: Any) -> None:
        if not isinstance(resources, dict):
            return
        gpu_class = resources.get("gpu_class")
        if isinstance(gpu_class, str) and gpu_class not in (classes := gpu_classes()):  # the file read only here
            self.add((*base, "resources", "gpu_class"), f"unknown GPU placement class {gpu_class!r}",
                     allowed=", ".join(classes), hint=closest(gpu_class, classes))
        gpus = resources.get("gpus", 0)
        if isinstance(gpus, int) and gpus == 0:
            for field in ("gpu_memory", "cuda_capability", "gpu_class"):
                if resources.get(field) is not None:
                    self.add((*base, "resources", field), f"{field} is set but the step requests no GPUs",
                             hint="add gpus: 1 (or more)")

    def _cycles(self, steps: dict[str, Any]) -> None:
        """Report each cycle among the steps' needs, one per disjoint group of cyclic steps."""
        order = list(steps)
        graph = {
            name: {need for need in _need_names(step) if need in steps}
            - {name}
            for name, step in steps.items()
            if isinstance(step, dict)
        }
        while True:
            try:
                TopologicalSorter(graph).prepare()
                return
            except CycleError as error:
                names = list(dict.fromkeys(error.args[1]))  # [a, b, ..., a]: each is needed by the next
            start = names.index(min(names, key=order.index))
            names = names[start:] + names[:start]
            self.add(("steps", names[0], "needs"), "steps form a cycle: " + " -> ".join([*names, names[0]]))
            graph = {name: preds - set(names) for name, preds in graph.items() if name not in names}

    def _control_chars(self, path: Path_, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                self._control_chars((*path, key), item)
        elif isinstance(value, str):
            self._no_control_chars(path, value)

    def _no_control_chars(self, path: Path_, text: str) -> None:
        if CONTROL_CHARACTERS.search(text):
            self.add(path, CONTROL_CHARACTERS_MESSAGE, hint=CONTROL_CHARACTERS_HINT)


def step_axes(step: dict[str, Any], matrix: dict[str, Any]) -> tuple[str, ...]:
    """The axes a step (as written) fans out over: model.py's fan_out_axes on the document's raw data."""
    return fan_out_axes(matrix, set(_over_axes(step)), _own_axes(step))


def _over_axes(step: dict[str, Any]) -> list[str]:
    """The axes a step (as written) gathers over; a value that is not text is reported as a type error."""
    return [axis for axis in _as_list(step.get("over")) if isinstance(axis, str)]


def _own_axes(step: dict[str, Any]) -> list[str]:
    own = step.get("matrix")
    if not isinstance(own, dict):
        return []
    axes = [str(axis) for axis in own if axis != INCLUDE]
    rows = _as_list(own.get(INCLUDE))
    return axes or ([str(axis) for axis in rows[0]] if rows and isinstance(rows[0], dict) else [])


def _need_names(step: dict[str, Any]) -> list[str]:
    names = [need.get("step") if isinstance(need, dict) else need for need in _as_list(step.get("needs"))]
    return [name for name in names if isinstance(name, str)]


def _file_variables(step: dict[str, Any]) -> set[str]:
    """{inputs}, {outputs} and the indexed forms the step's lists allow."""
    found = set()
    for field in FILE_FIELDS:
        found.add(field)
        found.update(f"{field}[{index}]" for index in range(len(_as_list(step.get(field)))))
    return found


def _variables(text: str) -> tuple[str, ...]:
    try:
        return parse_template(text).variables
    except TemplateError:
        return ()


def _inside(base: Path, relative: str) -> bool:
    """Whether base/relative, symbolic links resolved, is still under base."""
    root = base.resolve()
    return (root / relative).resolve().is_relative_to(root)


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


_GPU_MEMORY_FIELDS = ("command", "env")  # where {gpu.memory_mb} may go: what the node's program sees


def _requests_gpus(step: dict[str, Any]) -> bool:
    resources = step.get("resources")
    gpus = resources.get("gpus") if isinstance(resources, dict) else None
    return isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0


def _template_fields(base: Path_, step: dict[str, Any]) -> Iterator[tuple[Path_, str]]:
    """Every string field of a step that is rendered per node."""
    command = step.get("command")
    if isinstance(command, str):
        yield (*base, "command"), command
    for index, part in enumerate(_as_list(command)):
        if isinstance(part, str):
            yield (*base, "command", index), part
    for field in ("from", "to", "metrics", "publish"):
        if isinstance(step.get(field), str):
            yield (*base, field), step[field]
    promote = step.get("promote_if")
    if isinstance(promote, dict) and isinstance(promote.get("than"), str):
        yield (*base, "promote_if", "than"), promote["than"]
    for field in ("inputs", "outputs"):
        for index, item in enumerate(_as_list(step.get(field))):
            if isinstance(item, str):
                yield (*base, field, index), item
    checkpoint = step.get("checkpoint")
    if isinstance(checkpoint, dict):
        for index, item in enumerate(_as_list(checkpoint.get("files"))):
            if isinstance(item, str):
                yield (*base, "checkpoint", "files", index), item
    env = step.get("env")
    if isinstance(env, dict):
        for key, value in env.items():
            if isinstance(value, str):
                yield (*base, "env", key), value


# What other workflow tools call a field (Snakemake, Airflow, CI files): a spelling close to no field of ours
# ("source" reads as "resources") is what a newcomer types first, so name the field that means it.
_SYNONYMS = {
    "source": "from", "src": "from", "dest": "to", "destination": "to", "target": "to",
    "depends_on": "needs", "dependencies": "needs", "deps": "needs", "after": "needs",
    "cmd": "command", "run": "command", "script": "command", "shell": "command",
    "input": "inputs", "output": "outputs", "retry": "retries", "environment": "env",
}  # fmt: skip


def _meant(key: str, allowed: list[str]) -> str | None:
    """The "did you mean" of an unknown key: the field another tool's name for it means, else the closest."""
    meant = _SYNONYMS.get(key.lower())
    return f"did you mean {meant!r}?" if meant in allowed else closest(key, allowed)


_BLANK = re.compile(r"\s")


def runtime_errors(model: PipelineSpec, positions: Positions, filename: str) -> list[Diagnostic]:
    """Checks of `runtime:` (pipeline-wide and per step): values that reach an execute node's command line."""
    found: list[Diagnostic] = []
    layers: list[tuple[Path_, RuntimeSpec | None]] = [(("runtime",), model.runtime)]
    layers += [(("steps", name, "runtime"), step.runtime) for name, step in model.steps.items()]
    for base, runtime in layers:
        if runtime is None:
            continue
        for field in ("python", "container_image"):
            value = getattr(runtime, field)
            if value is None:
                continue
            path = (*base, field)
            problem = None
            if not value or _BLANK.search(value) or CONTROL_CHARACTERS.search(value):
                problem = f"{value!r} must be one word: no blanks or control characters"
            elif field == "python" and not value.startswith("/"):
                problem = f"{value!r} is not an absolute path (a job has no pipeline directory to start from)"
            if problem:
                line, column = positions.of(path)
                hint = "e.g. /opt/venv/bin/python" if field == "python" else "e.g. docker://python:3.11-slim"
                found.append(Diagnostic(filename, line, column, dotted(path), problem, hint=hint))
    return found
