"""Spearmint experiment directories: `config.json` (HIPS/Spearmint) or the older `config.pb`.

Both become a SpearmintExperiment whose variables are dagflow VariableSpecs, so the same SearchSpace
and optimisers serve a Spearmint experiment and a pipeline's `search:` block. Problems are reported
as a SpecError with file:line:column for each one.

config.json fields read: language, main-file, experiment-name, likelihood, variables (type FLOAT, INT
or ENUM; size; min and max; options) and, for multi-task configs, tasks (the OBJECTIVE task names the
value a main() returns in its result dict; Spearmint's default task name is "main"). Other Spearmint
settings (chooser, database, resources, polling-time, ...) are accepted and ignored.

config.pb fields read: language, name (the main module, e.g. "branin" for branin.py) and repeated
`variable { name type size min max options }`. The experiment name is the directory's name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dagflow.errors import Diagnostic, SpecError
from dagflow.search.space import SearchSpace
from dagflow.search.spearmint_pb import Located, parse_pb
from dagflow.spec.model import VariableSpec
from dagflow.spec.yamlpos import Positions, load_yaml

CONFIG_FILES = ("config.json", "config.pb")
LANGUAGES = ("PYTHON", "MATLAB", "SHELL", "MCR")
DEFAULT_TASK = "main"
_VARIABLE_FIELDS = ("type", "size", "min", "max", "options")


@dataclass(frozen=True)
class SpearmintExperiment:
    directory: Path
    config_file: Path
    name: str
    language: str
    main_file: str  # relative to the directory, e.g. "branin.py"
    variables: dict[str, VariableSpec]
    likelihood: str | None = None
    objective_task: str = DEFAULT_TASK
    ignored: tuple[str, ...] = field(default=())  # settings read but not used by dagflow

    def space(self) -> SearchSpace:
        return SearchSpace(self.variables)

    @property
    def main_path(self) -> Path:
        return self.directory / self.main_file


def load_experiment(directory: str | Path) -> SpearmintExperiment:
    """Read DIR/config.json, else DIR/config.pb."""
    directory = Path(directory)
    for name in CONFIG_FILES:
        path = directory / name
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            if name == "config.json":
                return parse_config_json(text, path)
            return parse_config_pb(text, path)
    raise SpecError([Diagnostic(str(directory), 0, 0, "", f"no {' or '.join(CONFIG_FILES)} in this directory")])


# --- the two syntaxes, to one located form ----------------------------------------------------------


def _locate_json(value: Any, path: tuple[str | int, ...], positions: Positions) -> Located:
    line, column = positions.of(path)
    if isinstance(value, dict):
        return Located({key: _locate_json(item, (*path, key), positions) for key, item in value.items()}, line, column)
    if isinstance(value, list):
        return Located([_locate_json(item, (*path, i), positions) for i, item in enumerate(value)], line, column)
    return Located(value, line, column)


def parse_config_json(text: str, path: str | Path) -> SpearmintExperiment:
    filename = str(path)
    try:
        json.loads(text)  # JSON's own rules first: YAML would accept more than JSON does
    except json.JSONDecodeError as error:
        raise SpecError([Diagnostic(filename, error.lineno, error.colno, "", f"invalid JSON: {error.msg}")]) from None
    data, positions = load_yaml(text.replace("\t", " "), filename)  # same text, with line/column of each value
    if not isinstance(data, dict):
        raise SpecError([Diagnostic(filename, 1, 1, "", "expected a JSON object")])
    root = _locate_json(data, (), positions)
    return _Builder(filename, Path(path)).experiment(root.value, pb=False)


def parse_config_pb(text: str, path: str | Path) -> SpearmintExperiment:
    filename = str(path)
    fields = parse_pb(text, filename)
    variables: dict[str, Located] = {}
    diagnostics: list[Diagnostic] = []
    for item in fields.pop("variable", []):
        if not isinstance(item.value, dict):
            diagnostics.append(Diagnostic(filename, item.line, item.column, "variable", "expected variable { ... }"))
            continue
        body = dict(item.value)
        name = body.pop("name", None)
        if name is None or not isinstance(name.value, str) or not name.value:
            diagnostics.append(Diagnostic(filename, item.line, item.column, "variable", "a variable needs a name"))
            continue
        if name.value in variables:
            diagnostics.append(
                Diagnostic(filename, name.line, name.column, f"variable {name.value}", "variable name used twice")
            )
            continue
        if "options" in body:
            options = body["options"]
            body["options"] = Located(options, options[0].line, options[0].column)
        variables[name.value] = Located(body, item.line, item.column)
    if diagnostics:
        raise SpecError(diagnostics)
    if variables:
        fields["variables"] = Located(variables, 1, 1)
    name = fields.pop("name", None)
    if name is not None:
        main = f"{name.value}.py" if isinstance(name.value, str) else name.value
        fields["main-file"] = Located(main, name.line, name.column)
    fields.setdefault("experiment-name", Located(Path(path).resolve().parent.name, 0, 0))
    return _Builder(filename, Path(path)).experiment(fields, pb=True)


# --- checks shared by both ---------------------------------------------------------------------------


class _Builder:
    def __init__(self, filename: str, path: Path) -> None:
        self.filename = filename
        self.path = path
        self.diagnostics: list[Diagnostic] = []

    def add(self, where: Located | None, field_path: str, message: str, allowed: str | None = None) -> None:
        line, column = (where.line, where.column) if where is not None else (0, 0)
        self.diagnostics.append(Diagnostic(self.filename, line, column, field_path, message, allowed))

    def string(self, fields: dict[str, Located], key: str, required: bool) -> str | None:
        item = fields.get(key)
        if item is None:
            if required:
                self.add(None, key, f"{key} is required")
            return None
        if not isinstance(item.value, str) or not item.value.strip():
            self.add(item, key, f"{key} must be a non-empty string")
            return None
        return item.value.strip()

    def experiment(self, fields: dict[str, Located], pb: bool) -> SpearmintExperiment:
        language = (self.string(fields, "language", required=False) or "PYTHON").upper()
        if language not in LANGUAGES:
            self.add(fields.get("language"), "language", f"unknown language {language!r}", ", ".join(LANGUAGES))
        main_key = "name" if pb else "main-file"
        main_file = self.string(fields, "main-file", required=False)
        if main_file is None and "main-file" not in fields:
            self.add(None, main_key, f"{main_key} is required: the file whose main(job_id, params) is run")
        name = self.string(fields, "experiment-name", required=False) or self.path.resolve().parent.name
        likelihood = self.string(fields, "likelihood", required=False)
        variables = self.variables(fields.get("variables"), "variable" if pb else "variables")
        objective = self.objective_task(fields.get("tasks"))
        if self.diagnostics:
            raise SpecError(self.diagnostics)
        assert main_file is not None
        if language == "PYTHON" and not main_file.endswith(".py"):
            main_file += ".py"  # Spearmint accepts the module name alone
        known = {"language", "main-file", "experiment-name", "likelihood", "variables", "tasks"}
        return SpearmintExperiment(
            directory=self.path.resolve().parent,
            config_file=self.path,
            name=name,
            language=language,
            main_file=main_file,
            variables=variables,
            likelihood=likelihood.upper() if likelihood else None,
            objective_task=objective,
            ignored=tuple(sorted(set(fields) - known)),
        )

    def variables(self, item: Located | None, label: str) -> dict[str, VariableSpec]:
        if item is None or not isinstance(item.value, dict) or not item.value:
            self.add(item, label, "at least one variable is required")
            return {}
        out: dict[str, VariableSpec] = {}
        for name, located in item.value.items():
            spec = self.variable(str(name), located, label)
            if spec is not None:
                out[str(name)] = spec
        return out

    def variable(self, name: str, item: Located, label: str) -> VariableSpec | None:
        where = f"{label}.{name}"
        if not isinstance(item.value, dict):
            self.add(item, where, "expected a variable definition with type, size, min/max or options")
            return None
        fields: dict[str, Located] = item.value
        before = len(self.diagnostics)
        for key, value in fields.items():
            if key not in _VARIABLE_FIELDS:
                self.add(value, f"{where}.{key}", f"unknown variable field {key!r}", ", ".join(_VARIABLE_FIELDS))
        raw: dict[str, Any] = {}
        kind = fields.get("type")
        if kind is None:
            self.add(item, where, "a variable needs a type", "FLOAT, INT, ENUM")
        elif not isinstance(kind.value, str) or kind.value.upper() not in ("FLOAT", "INT", "ENUM"):
            self.add(kind, f"{where}.type", f"unknown type {kind.value!r}", "FLOAT, INT, ENUM")
        else:
            raw["type"] = kind.value.upper()
        for key in ("size", "min", "max"):
            value = fields.get(key)
            if value is None:
                continue
            number = value.value
            if isinstance(number, bool) or not isinstance(number, int | float):
                self.add(value, f"{where}.{key}", f"{key} must be a number, not {number!r}")
            elif key == "size" and (not float(number).is_integer() or number < 1):
                self.add(value, f"{where}.{key}", f"size must be a whole number >= 1, not {number!r}")
            else:
                raw[key] = int(number) if key == "size" else number
        if "options" in fields:
            options = fields["options"]
            values = [o.value for o in options.value] if isinstance(options.value, list) else None
            if not values or not all(isinstance(v, str) for v in values):
                self.add(options, f"{where}.options", "options must be a non-empty list of strings")
            else:
                raw["options"] = values
        if len(self.diagnostics) > before:
            return None
        if raw.get("type") == "ENUM":
            for key in ("min", "max"):
                if key in raw:
                    self.add(fields[key], f"{where}.{key}", f"an ENUM variable takes options, not {key}")
                    return None
        elif "options" in raw:
            message = f"a {raw.get('type')} variable takes min and max, not options"
            self.add(fields["options"], f"{where}.options", message)
            return None
        try:
            return VariableSpec(**raw)
        except ValidationError as error:
            for problem in error.errors():
                message = problem["msg"].removeprefix("Value error, ")
                loc = [str(part) for part in problem["loc"]]
                target = fields.get(loc[0]) if loc else None
                self.add(target or item, ".".join([where, *loc]), message)
            return None

    def objective_task(self, item: Located | None) -> str:
        if item is None:
            return DEFAULT_TASK
        if not isinstance(item.value, dict):
            self.add(item, "tasks", "tasks must be an object of task name -> {type: OBJECTIVE | CONSTRAINT}")
            return DEFAULT_TASK
        objectives = [name for name, task in item.value.items() if _task_type(task) == "OBJECTIVE"]
        if len(objectives) != 1:
            self.add(item, "tasks", f"expected exactly one OBJECTIVE task, found {len(objectives)}")
            return DEFAULT_TASK
        return str(objectives[0])


def _task_type(task: Located) -> str | None:
    if isinstance(task.value, dict) and isinstance(task.value.get("type"), Located):
        value = task.value["type"].value
        return value.upper() if isinstance(value, str) else None
    return None

