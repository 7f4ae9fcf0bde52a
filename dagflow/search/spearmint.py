"""Spearmint experiment directories: `config.json` (HIPS/Spearmint) or the older `config.pb`.

Both become a SpearmintExperiment whose variables are dagflow VariableSpecs, so the same SearchSpace
and optimisers serve a Spearmint experiment and a pipeline's `search:` block. Problems are reported
as a SpecError with file:line:column for each one.

config.json fields read (HIPS/Spearmint's way, `-`, `_` and spaces in a key are the same: main-file,
main_file): language, main-file, experiment-name, likelihood, variables (type FLOAT, INT or ENUM; size;
min and max; options) and tasks: `{"name": {"type": OBJECTIVE | CONSTRAINT, "likelihood": ...,
"main-file": ...}}`, exactly one OBJECTIVE, any number of CONSTRAINTs (feasible where the value is >= 0,
Spearmint's convention), main-file at the top level or per task (one file for every task), likelihood
per task or at the top level (GAUSSIAN or NOISELESS). Without tasks the one objective is named "main"
(the value main() returns, or its "main" entry). A task without a likelihood is GAUSSIAN (Spearmint's
default; SpearmintTrials.default_likelihood). max-finished-jobs and max-concurrent (top-level, or each
of `resources`, summed) and random-seed become the search's budget, parallel and seed unless the command
line gives them. `base config file` (PESC's; `$LOCATION_OF_THIS_FILE$` is the naming file's directory) is
read first and the config's own settings laid over it, mapping by mapping; a main file a base config names
is beside that base config, and an error in a base config's value names that file. Other Spearmint
settings (acquisition, chooser, database, a resource's scheduler, polling-time, ...) are accepted, and
the search names each of them once at its start as not used.

Refused, with a message naming the file: MATLAB (and MCR, SHELL) experiments, whose main file dagflow
cannot call, and the spearmint-lite format (a config.json of bare variables, jobs run by hand through
results.dat), which has no main file to run. A config is read as untrusted input: at most 1 MiB of
UTF-8, nested at most MAX_DEPTH levels, a main file inside the experiment directory (no absolute path,
no `..`), an experiment name that can name the search's runs, finite bounds, a variable's size at most
MAX_VARIABLE_SIZE and at most MAX_DIMENSIONS dimensions in all (spec/model.py: the rules of a search block).

config.pb fields read: language, name (the main module, e.g. "branin" for branin.py) and repeated
`variable { name type size min max options }`. The experiment name is the directory's name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from dagflow.bounded import BoundedInputError, decode_utf8, loads_json, read_bounded
from dagflow.errors import DagflowError, Diagnostic, SpecError
from dagflow.run.ids import validate_run_id
from dagflow.search.space import SearchSpace
from dagflow.search.spearmint_pb import Located, parse_pb
from dagflow.spec.model import VariableSpec, too_many_dimensions
from dagflow.spec.yamlpos import Positions, load_yaml

CONFIG_FILES = ("config.json", "config.pb")
LOCATION_OF_THIS_FILE = "$LOCATION_OF_THIS_FILE$"  # in PESC's `base config file`: the naming file's directory
MAX_BASE_CONFIGS = 4
LANGUAGES = ("PYTHON", "MATLAB", "SHELL", "MCR")
DEFAULT_TASK = "main"
LIKELIHOODS = ("GAUSSIAN", "NOISELESS")
# Settings with a dagflow equivalent: max-finished-jobs -> budget, max-concurrent -> parallel, random-seed -> seed
_MAPPED = ("max-finished-jobs", "max-concurrent", "random-seed")
# What dagflow does instead of a setting it does not use, for the message naming it.
INSTEAD = {
    "acquisition": "dagflow's gp optimiser uses expected improvement (constrained EI with constraints)",
    "chooser": "choose the optimiser with --optimizer",
    "database": "the search's state lives in --db",
    "polling-time": "see --poll",
    "resources.scheduler": "trials run on --engine",
}
TASK_TYPES = ("OBJECTIVE", "CONSTRAINT")
_VARIABLE_FIELDS = ("type", "size", "min", "max", "options")
MAX_CONFIG_BYTES = 1024 * 1024


@dataclass(frozen=True)
class SpearmintTask:
    name: str
    type: str  # OBJECTIVE | CONSTRAINT
    likelihood: str | None = None  # GAUSSIAN | NOISELESS; None: dagflow's default model


@dataclass(frozen=True)
class SpearmintExperiment:
    directory: Path
    config_file: Path
    name: str
    language: str
    main_file: str  # relative to the directory, e.g. "branin.py"
    variables: dict[str, VariableSpec]
    likelihood: str | None = None  # the objective task's
    objective_task: str = DEFAULT_TASK
    constraints: dict[str, str | None] = field(default_factory=dict)  # CONSTRAINT task -> its likelihood
    ignored: tuple[str, ...] = field(default=())  # settings read but not used by dagflow
    budget: int | None = None  # max-finished-jobs (summed over resources)
    parallel: int | None = None  # max-concurrent (summed over resources)
    seed: int | None = None  # random-seed

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
            text = _read_config(path)
            if name == "config.json":
                return parse_config_json(text, path)
            return parse_config_pb(text, path)
    raise SpecError([Diagnostic(str(directory), 0, 0, "", f"no {' or '.join(CONFIG_FILES)} in this directory")])


def _read_config(path: Path) -> str:
    try:
        return decode_utf8(read_bounded(path, MAX_CONFIG_BYTES))
    except BoundedInputError as error:
        raise SpecError([Diagnostic(str(path), error.line, error.column, "", error.message)]) from None
    except OSError as error:
        raise SpecError([Diagnostic(str(path), 0, 0, "", f"cannot read it: {error.strerror}")]) from None


# --- the two syntaxes, to one located form ----------------------------------------------------------


def _locate_json(value: Any, path: tuple[str | int, ...], positions: Positions, file: str | None) -> Located:
    line, column = positions.of(path)
    if isinstance(value, dict):
        items = {key: _locate_json(item, (*path, key), positions, file) for key, item in value.items()}
        return Located(items, line, column, file)
    if isinstance(value, list):
        listed = [_locate_json(item, (*path, i), positions, file) for i, item in enumerate(value)]
        return Located(listed, line, column, file)
    return Located(value, line, column, file)


def parse_config_json(text: str, path: str | Path) -> SpearmintExperiment:
    fields = _read_json_fields(text, str(path), None)
    fields = _with_base_config(fields, Path(path), str(path), (Path(path).resolve(),))
    return _Builder(str(path), Path(path)).experiment(fields, pb=False)


def _read_json_fields(text: str, filename: str, file: str | None) -> dict[str, Located]:
    """A config.json's fields, canonical keys, each value located (in `file` when it is a base config)."""
    try:
        loads_json(text)  # JSON's own rules first (YAML would accept more), and its depth bounded
    except BoundedInputError as error:
        raise SpecError([Diagnostic(filename, error.line, error.column, "", error.message)]) from None
    data, positions = load_yaml(text.replace("\t", " "), filename)  # same text, with line/column of each value
    if not isinstance(data, dict):
        raise SpecError([Diagnostic(filename, 1, 1, "", "expected a JSON object")])
    if _is_spearmint_lite(data):
        message = (
            "this is a spearmint-lite config (bare variables, jobs run by hand through results.dat): "
            "dagflow cannot run it; write a Spearmint config.json with main-file and variables"
        )
        raise SpecError([Diagnostic(filename, 1, 1, "", message)])
    return _canonical_keys(_locate_json(data, (), positions, file).value)


def _with_base_config(
    fields: dict[str, Located], path: Path, filename: str, seen: tuple[Path, ...]
) -> dict[str, Located]:
    """PESC's `base config file`: the config it names (`$LOCATION_OF_THIS_FILE$` is this file's directory)
    is read first, and this config's settings are laid over it, task by task and variable by variable."""
    item = fields.pop("base-config-file", None)
    if item is None:
        return fields
    where = item.file or filename

    def refuse(message: str) -> SpecError:
        return SpecError([Diagnostic(where, item.line, item.column, "base config file", message)])

    if not isinstance(item.value, str) or not item.value.strip():
        raise refuse("base config file must name a config.json")
    here = path.resolve().parent
    base = Path(item.value.strip().replace(LOCATION_OF_THIS_FILE, str(here)))
    base = (here / base).resolve()
    if base in seen:
        raise refuse(f"{base} is already being read: base config files form a loop")
    if len(seen) > MAX_BASE_CONFIGS:
        raise refuse(f"more than {MAX_BASE_CONFIGS} base config files in a chain")
    if not base.is_file():
        raise refuse(f"{base} does not exist (a relative path is relative to this file's directory)")
    base_fields = _read_json_fields(_read_config(base), str(base), str(base))
    base_fields = _with_base_config(base_fields, base, str(base), (*seen, base))
    return _laid_over(base_fields, fields)


def _laid_over(base: dict[str, Located], own: dict[str, Located]) -> dict[str, Located]:
    out = dict(base)
    for key, value in own.items():
        under = out.get(key)
        if under is not None and isinstance(under.value, dict) and isinstance(value.value, dict):
            value = Located(_laid_over(under.value, value.value), value.line, value.column, value.file)
        out[key] = value
    return out


def _canonical(key: str) -> str:
    """Spearmint reads `main_file`, `main-file` and `main file` alike."""
    return key.strip().replace("_", "-").replace(" ", "-").lower()


def _canonical_keys(fields: dict[str, Located]) -> dict[str, Located]:
    out = {_canonical(str(key)): value for key, value in fields.items()}
    tasks = out.get("tasks")
    if tasks is not None and isinstance(tasks.value, dict):
        canonical_tasks = {
            name: Located(_canonical_keys(task.value), task.line, task.column) if isinstance(task.value, dict) else task
            for name, task in tasks.value.items()
        }
        out["tasks"] = Located(canonical_tasks, tasks.line, tasks.column)
    return out


def _is_spearmint_lite(data: dict[str, Any]) -> bool:
    """spearmint-lite's config.json: {"X": {"name": "X", "type": "float", ...}, ...}, nothing else."""
    return bool(data) and all(
        isinstance(value, dict) and "type" in value and "name" in value for value in data.values()
    )


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
        filename = where.file if where is not None and where.file else self.filename
        self.diagnostics.append(Diagnostic(filename, line, column, field_path, message, allowed))

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
        name = self.name(fields)
        likelihood = self.likelihood(fields, "likelihood")
        variables = self.variables(fields.get("variables"), "variable" if pb else "variables")
        tasks = self.tasks(fields.get("tasks"), likelihood)
        main = self.task_main_file(fields.get("tasks"), _MainFile.of(main_file, fields.get("main-file"), main_key))
        if main is None and not any("main-file" in d.path for d in self.diagnostics):
            self.add(None, main_key, f"{main_key} is required: the file whose main(job_id, params) is run")
        main_file = main.path if main is not None else ""
        if language == "PYTHON" and not main_file.endswith(".py"):
            main_file += ".py"  # Spearmint accepts the module name alone
        if main is not None and _outside(main_file):
            message = f"{main_file!r} is outside the experiment directory: name a file inside it, e.g. branin.py"
            self.add(main.at, main.field, message)
        elif main is not None and main.at is not None and main.at.file:  # named by a base config: beside it
            main_file = os.path.relpath(Path(main.at.file).parent / main_file, self.path.resolve().parent)
        if self.diagnostics:
            raise SpecError(self.diagnostics)
        objective = next(task for task in tasks if task.type == "OBJECTIVE")
        budget = self.resource_total(fields, "max-finished-jobs")
        parallel = self.resource_total(fields, "max-concurrent")
        seed = self.count(fields.get("random-seed"), "random-seed", minimum=0)
        if self.diagnostics:
            raise SpecError(self.diagnostics)
        known = {"language", "main-file", "experiment-name", "likelihood", "variables", "tasks", *_MAPPED}
        resources = fields.get("resources")
        resource_keys = {
            f"resources.{_canonical(str(key))}"
            for item in (resources.value.values() if resources and isinstance(resources.value, dict) else ())
            if isinstance(item.value, dict)
            for key in item.value
            if _canonical(str(key)) not in _MAPPED
        }
        return SpearmintExperiment(
            directory=self.path.resolve().parent,
            config_file=self.path,
            name=name,
            language=language,
            main_file=main_file,
            variables=variables,
            likelihood=objective.likelihood,
            objective_task=objective.name,
            constraints={task.name: task.likelihood for task in tasks if task.type == "CONSTRAINT"},
            ignored=tuple(sorted((set(fields) - known - {"resources"}) | resource_keys)),
            budget=budget,
            parallel=parallel,
            seed=seed,
        )

    def count(self, item: Located | None, where: str, minimum: int = 1) -> int | None:
        if item is None:
            return None
        value = item.value
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            self.add(item, where, f"{where} must be a whole number >= {minimum}, not {value!r}")
            return None
        return value

    def resource_total(self, fields: dict[str, Located], key: str) -> int | None:
        """A resource limit (max-finished-jobs, max-concurrent): the top-level one, or the sum over HIPS's
        `resources` (each resource runs its own jobs up to its own limits)."""
        top = self.count(fields.get(key), key)
        resources = fields.get("resources")
        if resources is None or not isinstance(resources.value, dict):
            return top
        found = [
            self.count(_canonical_keys(item.value).get(key), f"resources.{name}.{key}")
            for name, item in resources.value.items()
            if isinstance(item.value, dict)
        ]
        given = [value for value in found if value is not None]
        return sum(given) if given else top

    def likelihood(self, fields: dict[str, Located], where: str, default: str | None = None) -> str | None:
        item = fields.get("likelihood")
        if item is None:
            return default
        value = item.value.strip().upper() if isinstance(item.value, str) else None
        if value not in LIKELIHOODS:
            message = f"likelihood {item.value!r} is not one dagflow models"
            self.add(item, where, message, ", ".join(LIKELIHOODS))
            return default
        return value

    def tasks(self, item: Located | None, likelihood: str | None) -> list[SpearmintTask]:
        if item is None:
            return [SpearmintTask(DEFAULT_TASK, "OBJECTIVE", likelihood)]
        if not isinstance(item.value, dict) or not item.value:
            self.add(item, "tasks", "tasks must be an object of task name -> {type: OBJECTIVE | CONSTRAINT}")
            return [SpearmintTask(DEFAULT_TASK, "OBJECTIVE", likelihood)]
        tasks = [self.task(str(name), task, likelihood) for name, task in item.value.items()]
        found = [task for task in tasks if task is not None]
        objectives = [task for task in found if task.type == "OBJECTIVE"]
        if len(found) == len(tasks) and len(objectives) != 1:
            self.add(item, "tasks", f"expected exactly one OBJECTIVE task, found {len(objectives)}")
        return found if objectives else [SpearmintTask(DEFAULT_TASK, "OBJECTIVE", likelihood)]

    def task(self, name: str, item: Located, likelihood: str | None) -> SpearmintTask | None:
        where = f"tasks.{name}"
        if not isinstance(item.value, dict):
            self.add(item, where, "a task is an object: {type: OBJECTIVE | CONSTRAINT, likelihood, main-file}")
            return None
        fields: dict[str, Located] = item.value
        kind = fields.get("type")
        value = kind.value.strip().upper() if kind is not None and isinstance(kind.value, str) else None
        if value not in TASK_TYPES:
            self.add(kind or item, f"{where}.type", f"a task's type must be OBJECTIVE or CONSTRAINT, not {value!r}")
            return None
        return SpearmintTask(name, value, self.likelihood(fields, f"{where}.likelihood", likelihood))

    def name(self, fields: dict[str, Located]) -> str:
        """experiment-name, else the directory's name; a name the config gives must be able to name the
        search and its trial runs (a directory's name is the user's own, and --name can replace it)."""
        given = fields.get("experiment-name")
        name = self.string(fields, "experiment-name", required=False)
        if name is None:
            return self.path.resolve().parent.name
        try:
            validate_run_id(name)
        except DagflowError as error:
            self.add(given, "experiment-name", f"{error} (the search and its runs are named after it)")
        return name

    def task_main_file(self, item: Located | None, main_file: _MainFile | None) -> _MainFile | None:
        """The top-level main-file, or the one the tasks name (HIPS's per-task form); one file for all."""
        if item is None or not isinstance(item.value, dict):
            return main_file
        named: dict[str, Located] = {}
        for name, task in item.value.items():
            if isinstance(task.value, dict) and "main-file" in task.value:
                value = self.string(task.value, "main-file", required=False)
                if value is not None:
                    named[str(name)] = task.value["main-file"]
        files = {_module(str(found.value)) for found in named.values()}
        files |= {_module(main_file.path)} if main_file else set()
        if len(files) > 1:
            first = next(iter(named))
            message = (
                f"the tasks name different main files ({', '.join(sorted(files))}): dagflow runs one main file "
                "that returns every task's value"
            )
            self.add(named[first], f"tasks.{first}.main-file", message)
            return None
        if main_file is not None or not named:
            return main_file
        task, at = next(iter(named.items()))
        return _MainFile(str(at.value).strip(), at, f"tasks.{task}.main-file")

    def variables(self, item: Located | None, label: str) -> dict[str, VariableSpec]:
        if item is None or not isinstance(item.value, dict) or not item.value:
            self.add(item, label, "at least one variable is required")
            return {}
        out: dict[str, VariableSpec] = {}
        for name, located in item.value.items():
            spec = self.variable(str(name), located, label)
            if spec is not None:
                out[str(name)] = spec
        if (problem := too_many_dimensions(out)) is not None:
            self.add(item, label, problem)
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


@dataclass(frozen=True)
class _MainFile:
    path: str  # as the config gives it
    at: Located | None
    field: str  # where it is given: main-file, name (config.pb) or tasks.<task>.main-file

    @staticmethod
    def of(path: str | None, at: Located | None, field: str) -> _MainFile | None:
        return _MainFile(path, at, field) if path is not None else None


def _outside(main_file: str) -> bool:
    """Whether the path leaves the experiment directory (checked on the text: the file need not exist yet)."""
    path = PurePosixPath(main_file)
    return path.is_absolute() or ".." in path.parts


def _module(main_file: str) -> str:
    return main_file.strip().removesuffix(".py")
