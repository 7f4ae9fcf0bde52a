"""Run one Spearmint job: `python -m dagflow.search.spearmint_job --dir DIR --job-id N --params JSON`.

The Spearmint calling convention: change into DIR, put it on sys.path, import the config's main file
and call `main(job_id, params)`, where job ids count from 1 and params maps each variable to a numpy
array of length `size` (floats for FLOAT, ints for INT) or, for ENUM, a list of `size` strings. The
arrays are a SpearmintArray: under the numpy of Spearmint's time `float(x)` worked on a length-1 array
and example main files rely on it (numpy 2.4 refuses it), so a size-1 array converts to a scalar here.

main may return:
- a number: the objective;
- a dict: the objective is its entry for the experiment's objective task, "main" unless config.json's
  `tasks` names another OBJECTIVE task, and each CONSTRAINT task's value must be there too (a finite
  number; >= 0 is feasible); the {"objective": ..., "constraints": [...]} form works too. Every entry
  is kept in the result file under "values".

While main runs, the job's stdout and stderr go to DIR/output/JOB_ID.out as under Spearmint (and are
copied to this process's stdout afterwards). The result goes to a JSON file (--result, default
DIR/output/JOB_ID.json, the id zero-padded to 8 digits as Spearmint names its output files):

    {"job_id": 3, "status": "complete", "value": 0.39, "values": {...}, "params": {...},
     "error": null, "elapsed_s": 1.2}

A NaN objective (main returns NaN, or a dict whose objective entry is NaN) is HIPS Spearmint's infeasible
point, not a broken job: the job is "complete" with `"value": "nan"` and `"infeasible": true` (exit 0), and
the search models the NaN region as an implicit constraint (gp_ei.py). As under HIPS (launcher.py), a bare
NaN stands for every task, so with CONSTRAINT tasks it needs no dict, and a NaN objective's constraint
entries may be NaN too (they are left out of its values). An infinite objective, a missing objective entry,
or an exception in main marks the job "broken": the file gets the error (with the traceback) and the
process exits with status 1. A main
file Python cannot import (a SyntaxError: most often Python 2's `print x`) also gets `"fatal": true`,
since no job of the experiment can run it; a Python 2 file is named as such, with what to do. Bad
arguments or a bad config exit with status 2 and write no result.

With `--python PATH` (the search's `--python`) main runs under that interpreter instead, Python 2 or 3:
this process (dagflow's Python) starts it on CHILD_SOURCE, which imports the main file and calls main
as above (numpy arrays where that interpreter has numpy, else lists that a size-1 one converts to a
scalar), and reads the result back as JSON.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dagflow.errors import EXIT_USAGE, DagflowError
from dagflow.files import write_atomic
from dagflow.search.spearmint import SpearmintExperiment, load_experiment
from dagflow.search.spearmint_records import captured_output, output_path
from dagflow.spec.model import VariableSpec

EXIT_BROKEN = 1


class JobFailed(Exception):
    """main ran but gave no usable objective."""


class MainUnrunnable(Exception):
    """No job can run the main file (it does not compile); the message says why and what to do."""


# What Python 3 says of Python 2 syntax, by the error's message or the offending line's text.
_PYTHON2_MESSAGES = (
    "Missing parentheses in call to 'print'",
    "Missing parentheses in call to 'exec'",
    "multiple exception types must be parenthesized",
    "leading zeros in decimal integer literals",
)
_PYTHON2_LINE = re.compile(
    r"""^\s*(print\s+[^\s(=]|exec\s+["'\w]|raise\s+\w+(\.\w+)*\s*,)|\bexcept\s+[\w.]+\s*,\s*\w+\s*:|`|<>|\bur["']"""
)


def syntax_problem(filename: str, message: str, line: int | None, text: str | None) -> str:
    """What to tell the user of a main file (or a module it imports) that does not compile."""
    name = os.path.basename(filename or "") or "the main file"
    shown = (text or "").strip()
    where = f"line {line}: {shown}" if shown else f"line {line}"
    if message.startswith(_PYTHON2_MESSAGES) or _PYTHON2_LINE.search(shown):
        return (
            f"{name} is Python 2 ({where}), which Python 3 cannot import: convert it with `2to3 -w {name}`, "
            "or name a Python 2 interpreter to run it (dagflow search --spearmint DIR --python /usr/bin/python2)"
        )
    return f"{name} does not compile ({where}: SyntaxError: {message}); no job can import it"


class SpearmintArray(np.ndarray):
    """A numpy array whose size-1 instances also convert to Python scalars, as numpy <= 2.3 allowed:
    `float(params["x"])`, `int(params["k"])`, `range(params["k"])`, `"%f" % params["x"]`."""

    def __float__(self) -> float:
        return float(self._single())

    def __int__(self) -> int:
        return int(self._single())

    def __index__(self) -> int:
        return self._single().__index__()

    def _single(self) -> Any:
        if self.size != 1:
            raise TypeError(f"only size-1 arrays can be converted to Python scalars (this one has size {self.size})")
        return self.reshape(-1).view(np.ndarray)[0]


def _array(values: list[Any], dtype: type) -> SpearmintArray:
    return np.array(values, dtype=dtype).view(SpearmintArray)


def spearmint_params(variables: Mapping[str, VariableSpec], params: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-ish params (scalars or lists) in Spearmint's types: numpy arrays of length size, str lists for ENUM."""
    unknown = sorted(set(params) - set(variables))
    missing = sorted(set(variables) - set(params))
    if unknown or missing:
        parts = [f"unknown: {', '.join(unknown)}"] if unknown else []
        parts += [f"missing: {', '.join(missing)}"] if missing else []
        raise ValueError(f"params do not match the config's variables ({'; '.join(parts)})")
    out: dict[str, Any] = {}
    for name, spec in variables.items():
        raw = params[name]
        values = list(raw) if isinstance(raw, list | tuple) else [raw]
        if len(values) != spec.size:
            raise ValueError(f"{name}: expected {spec.size} value(s), got {len(values)}")
        if spec.type == "ENUM":
            options = [str(o) for o in spec.options or []]
            strings = [str(v) for v in values]
            bad = [s for s in strings if s not in options]
            if bad:
                raise ValueError(f"{name}: {bad[0]!r} is not one of {options}")
            out[name] = strings
        elif spec.type == "INT":
            if any(isinstance(v, bool) or not float(v).is_integer() for v in values):
                raise ValueError(f"{name}: INT values must be whole numbers, got {values}")
            out[name] = _array([int(v) for v in values], int)
        else:
            out[name] = _array([float(v) for v in values], float)
    return out


def objective_of(result: Any, task: str, constraints: Sequence[str] = ()) -> tuple[float, dict[str, float] | None]:
    """The objective value and, for a dict result, every finite-or-not entry as a float. With constraint
    tasks the result must be a dict holding each of them as a finite number."""
    if not isinstance(result, Mapping):
        if constraints and _is_nan(result):  # HIPS: a bare NaN is NaN on every task
            return math.nan, None
        if constraints:
            raise JobFailed(f"main returned {result!r}, not a dict of the tasks {', '.join([task, *constraints])}")
        return _number(result, "the result"), None
    values = {str(key): _number(value, str(key)) for key, value in result.items() if key != "constraints"}
    if "objective" in result and task not in result:
        listed = result.get("constraints") or []
        values.update({f"c{i}": _number(c, f"constraints[{i}]") for i, c in enumerate(listed)})
        values[task] = values.pop("objective")
        values.update({name: values.pop(f"c{i}") for i, name in enumerate(constraints) if f"c{i}" in values})
    missing = [name for name in (task, *constraints) if name not in values]
    if missing:
        raise JobFailed(f"main returned a dict without the task(s) {', '.join(map(repr, missing))} "
                        f"(keys: {sorted(values)})")
    if math.isnan(values[task]):  # infeasible: its constraint values are kept where they are numbers
        return values[task], {name: value for name, value in values.items() if not math.isnan(value)}
    bad = [name for name in constraints if not math.isfinite(values[name])]
    if bad:
        raise JobFailed(f"the constraint {bad[0]!r} is {values[bad[0]]}")
    return values[task], values


def _is_nan(value: Any) -> bool:
    try:
        return math.isnan(_number(value, "the result"))
    except JobFailed:
        return False


def _number(value: Any, what: str) -> float:
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise JobFailed(f"{what} is not a number: {value!r}")
    return float(value)


def refusal(language: str) -> str:
    """Why an experiment in this language cannot run here."""
    return (
        f"dagflow runs PYTHON main files only; a {language} experiment cannot be run "
        "(Spearmint called its MATLAB/MCR main files through MATLAB and its SHELL ones as scripts)"
    )


def _import_main(experiment: SpearmintExperiment) -> Any:
    path = experiment.main_path
    if not path.is_file():
        raise FileNotFoundError(f"main file {path} does not exist")
    module_spec = importlib.util.spec_from_file_location(path.stem, path)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[path.stem] = module
    try:
        module_spec.loader.exec_module(module)
    except SyntaxError as error:
        raise MainUnrunnable(syntax_problem(error.filename or "", error.msg, error.lineno, error.text)) from None
    if not callable(getattr(module, "main", None)):
        raise AttributeError(f"{path.name} has no main(job_id, params) function")
    return module


def _call_here(experiment: SpearmintExperiment, job_id: int, params: Mapping[str, Any]) -> Any:
    converted = spearmint_params(experiment.variables, params)
    cwd = os.getcwd()
    directory = str(experiment.directory)
    os.chdir(directory)
    sys.path.insert(0, directory)
    try:
        return _import_main(experiment).main(job_id, converted)
    finally:
        os.chdir(cwd)
        if directory in sys.path:
            sys.path.remove(directory)


# Run by the --python interpreter: Python 2.6+ and 3 alike, with nothing but its standard library (and
# numpy where it has it). argv: directory, the main file's directory, its module, job id, params JSON,
# variable types JSON, out file.
CHILD_SOURCE = r"""
import json, os, sys, traceback
directory, module_dir, module, job_id, params, types, out = sys.argv[1:8]
class SpearmintList(list):
    def one(self):
        if len(self) != 1:
            raise TypeError("only size-1 arrays can be converted to Python scalars")
        return self[0]
    def __float__(self):
        return float(self.one())
    def __int__(self):
        return int(self.one())
    def __index__(self):
        return int(self.one())
def convert(values, kind):
    if kind == "ENUM":
        return [str(v) for v in values]
    cast = float if kind == "FLOAT" else int
    try:
        import numpy
        return numpy.array([cast(v) for v in values], dtype=cast)
    except ImportError:
        return SpearmintList(cast(v) for v in values)
def plain(value):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    try:
        return float(value)
    except (TypeError, ValueError):
        return repr(value)
def write(record):
    handle = open(out, "w")
    handle.write(json.dumps(record))
    handle.close()
os.chdir(directory)
sys.path.insert(0, module_dir)
types = json.loads(types)
params = dict((name, convert(values, types[name])) for name, values in json.loads(params).items())
try:
    main = __import__(module).main
except SyntaxError:
    error = sys.exc_info()[1]
    write({"syntax_error": [error.filename, error.msg, error.lineno, error.text]})
    sys.exit(0)
except Exception:
    write({"error": traceback.format_exc()})
    sys.exit(0)
try:
    write({"result": plain(main(int(job_id), params))})
except Exception:
    write({"error": traceback.format_exc()})
"""


def _call_in(python: str, experiment: SpearmintExperiment, job_id: int, params: Mapping[str, Any]) -> Any:
    """main's result, run by another interpreter (CHILD_SOURCE); its failures raised as here."""
    spearmint_params(experiment.variables, params)  # the same checks of the params as in this process
    lists = {name: value if isinstance(value, list) else [value] for name, value in params.items()}
    types = {name: spec.type for name, spec in experiment.variables.items()}
    with tempfile.TemporaryDirectory(prefix="dagflow-job-") as scratch:
        out = Path(scratch) / "result.json"
        main = experiment.main_path
        argv = [python, "-c", CHILD_SOURCE, str(experiment.directory), str(main.parent), main.stem,
                str(job_id), json.dumps(lists), json.dumps(types), str(out)]  # fmt: skip
        process = subprocess.run(argv, stdin=subprocess.DEVNULL, check=False)
        if not out.is_file():
            raise JobFailed(f"{python} exited with status {process.returncode} without running main")
        reply = json.loads(out.read_text(encoding="utf-8"))
    if "syntax_error" in reply:
        raise MainUnrunnable(syntax_problem(*reply["syntax_error"]))
    if "error" in reply:
        raise JobFailed(f"main failed under {python}:\n{str(reply['error']).rstrip()}")
    return reply.get("result")


def run_job(
    experiment: SpearmintExperiment, job_id: int, params: Mapping[str, Any], python: str | None = None
) -> dict[str, Any]:
    """Call main (in this process, or under the interpreter `python`) and describe the outcome. Raises
    ValueError for params that do not fit the config; a failure inside the job is never raised but recorded."""
    spearmint_params(experiment.variables, params)
    record: dict[str, Any] = {
        "job_id": job_id, "experiment": experiment.name, "status": "broken", "value": None, "values": None,
        "params": dict(params), "error": None,
    }
    started = time.monotonic()
    try:
        if python is None:
            result = _call_here(experiment, job_id, params)
        else:
            result = _call_in(python, experiment, job_id, params)
        value, values = objective_of(result, experiment.objective_task, tuple(experiment.constraints))
        record["values"] = values
        if math.isinf(value):
            raise JobFailed(f"the objective is {value}")
        record.update(status="complete", value=value)
        if math.isnan(value):  # HIPS Spearmint's infeasible point: completed, never the best
            record["infeasible"] = True
    except JobFailed as error:
        record["error"] = str(error)
    except MainUnrunnable as error:
        record.update(error=str(error), fatal=True)
    except BaseException as error:  # the job's own failure, whatever it is, belongs in its result
        if isinstance(error, KeyboardInterrupt):
            raise
        record["error"] = "".join(traceback.format_exception(error)).rstrip()
    record["elapsed_s"] = round(time.monotonic() - started, 6)
    return record


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and inf are not JSON
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def write_result(path: Path, record: Mapping[str, Any]) -> None:
    # readers never see half a file
    write_atomic(path, (json.dumps(_json_safe(dict(record)), indent=2, sort_keys=True) + "\n").encode("utf-8"))


def default_result_path(experiment: SpearmintExperiment, job_id: int) -> Path:
    return experiment.directory / "output" / f"{job_id:08d}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m dagflow.search.spearmint_job", description="Run one Spearmint job and record its result."
    )
    parser.add_argument("--dir", required=True, type=Path, help="the Spearmint experiment directory")
    parser.add_argument("--job-id", required=True, type=int, help="the job's id, from 1")
    parser.add_argument("--params", required=True, help="JSON object: variable name -> value or list of values")
    parser.add_argument("--result", type=Path, default=None, help="result file (default DIR/output/JOB_ID.json)")
    parser.add_argument("--python", default=None, help="the interpreter that runs main (default: this one)")
    args = parser.parse_args(argv)
    if args.job_id < 1:
        parser.error("--job-id counts from 1")
    try:
        params = json.loads(args.params)
    except json.JSONDecodeError as error:
        parser.error(f"--params is not JSON: {error}")
    if not isinstance(params, dict):
        parser.error("--params must be a JSON object")
    try:
        experiment = load_experiment(args.dir)
    except DagflowError as error:
        print(error, file=sys.stderr)
        return EXIT_USAGE
    if experiment.language != "PYTHON":
        print(f"{experiment.config_file}: language: {refusal(experiment.language)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with captured_output(output_path(experiment.directory, args.job_id)):
            record = run_job(experiment, args.job_id, params, args.python)
    except ValueError as error:
        print(f"--params: {error}", file=sys.stderr)
        return EXIT_USAGE
    write_result(args.result or default_result_path(experiment, args.job_id), record)
    if record["status"] != "complete":
        print(f"job {args.job_id} broken: {record['error']}", file=sys.stderr)
        return EXIT_BROKEN
    infeasible = " (a NaN objective: infeasible, as HIPS Spearmint has it)" if "infeasible" in record else ""
    print(f"job {args.job_id} complete: {record['value']}{infeasible}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
