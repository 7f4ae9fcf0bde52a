"""Spearmint experiment configs: config.json and config.pb to dagflow variables, with located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagflow.errors import SpecError
from dagflow.search.spearmint import load_experiment, parse_config_json, parse_config_pb
from dagflow.spec.model import VariableSpec

CONFIG_JSON = """{
    "language"        : "PYTHON",
    "main-file"       : "branin.py",
    "experiment-name" : "every-type",
    "likelihood"      : "NOISELESS",
    "polling-time"    : 1,
    "variables" : {
        "x" : {"type" : "FLOAT", "size" : 2, "min" : -5, "max" : 10},
        "n" : {"type" : "int", "size" : 1, "min" : 1, "max" : 8},
        "act" : {"type" : "ENUM", "size" : 3, "options" : ["relu", "tanh"]},
        "y" : {"type" : "FLOAT", "min" : 0, "max" : 15}
    }
}
"""

CONFIG_PB = """language: PYTHON
name:     "branin"

# a comment
variable {
 name: "X"
 type: FLOAT
 size: 2
 min:  0
 max:  1
}

variable { name: "K" type: INT size: 3 min: -5 max: 5 }

variable {
  name: 'Z'
  type: ENUM
  size: 1
  options: "foo"
  options: "bar"
  options: "baz"
}
"""


def test_config_json_with_every_type() -> None:
    experiment = parse_config_json(CONFIG_JSON, "/tmp/every/config.json")
    assert experiment.name == "every-type"
    assert experiment.language == "PYTHON"
    assert experiment.main_file == "branin.py"
    assert experiment.likelihood == "NOISELESS"
    assert experiment.objective_task == "main"
    assert experiment.ignored == ("polling-time",)
    assert experiment.variables == {
        "x": VariableSpec(type="FLOAT", size=2, min=-5, max=10),
        "n": VariableSpec(type="INT", size=1, min=1, max=8),
        "act": VariableSpec(type="ENUM", size=3, options=["relu", "tanh"]),
        "y": VariableSpec(type="FLOAT", min=0, max=15),
    }
    space = experiment.space()
    assert space.names == ["x", "n", "act", "y"]
    assert space.dim == 2 + 1 + 3 * 2 + 1


def test_config_pb_with_every_type(tmp_path: Path) -> None:
    directory = tmp_path / "braninpy"
    directory.mkdir()
    (directory / "config.pb").write_text(CONFIG_PB)
    experiment = load_experiment(directory)
    assert experiment.name == "braninpy"
    assert experiment.main_file == "branin.py"
    assert experiment.variables == {
        "X": VariableSpec(type="FLOAT", size=2, min=0, max=1),
        "K": VariableSpec(type="INT", size=3, min=-5, max=5),
        "Z": VariableSpec(type="ENUM", size=1, options=["foo", "bar", "baz"]),
    }


def test_config_json_is_preferred_and_tasks_name_the_objective(tmp_path: Path) -> None:
    (tmp_path / "config.pb").write_text(CONFIG_PB)
    (tmp_path / "config.json").write_text(
        '{"main-file": "f", "tasks": {"loss": {"type": "OBJECTIVE"}, "c": {"type": "CONSTRAINT"}},'
        ' "variables": {"a": {"type": "FLOAT", "min": 0, "max": 1}}}'
    )
    experiment = load_experiment(tmp_path)
    assert experiment.config_file.name == "config.json"
    assert experiment.main_file == "f.py"
    assert experiment.objective_task == "loss"


def errors(exc: pytest.ExceptionInfo[SpecError]) -> list[str]:
    return [d.render() for d in exc.value.diagnostics]


def test_json_syntax_errors_are_located() -> None:
    with pytest.raises(SpecError) as exc:
        parse_config_json('{\n  "main-file": "f.py",\n  "variables": {,}\n}', "c/config.json")
    assert errors(exc) == [
        "c/config.json:3:17: <document>: invalid JSON: Expecting property name enclosed in double quotes"
    ]


def test_bad_variables_are_each_reported_at_their_line() -> None:
    text = """{
  "main-file": "f.py",
  "variables": {
    "a": {"type": "FLOT", "min": 0, "max": 1},
    "b": {"type": "FLOAT", "min": 2, "max": 1},
    "c": {"type": "ENUM", "options": []},
    "d": {"type": "INT", "min": 0, "max": 3, "step": 1},
    "e": {"type": "FLOAT", "size": 0, "min": 0, "max": 1},
    "f": {"type": "ENUM", "options": ["a"], "min": 0}
  }
}"""
    with pytest.raises(SpecError) as exc:
        parse_config_json(text, "config.json")
    rendered = errors(exc)
    assert rendered[0].startswith("config.json:4:") and "unknown type 'FLOT'" in rendered[0]
    assert rendered[1].startswith("config.json:5:") and "min must be less than max" in rendered[1]
    assert rendered[2].startswith("config.json:6:") and "options must be a non-empty list" in rendered[2]
    assert rendered[3].startswith("config.json:7:") and "unknown variable field 'step'" in rendered[3]
    assert rendered[4].startswith("config.json:8:") and "size must be a whole number" in rendered[4]
    assert rendered[5].startswith("config.json:9:") and "ENUM variable takes options, not min" in rendered[5]
    assert len(rendered) == 6


def test_missing_main_file_and_variables() -> None:
    with pytest.raises(SpecError) as exc:
        parse_config_json('{"language": "COBOL"}', "config.json")
    text = "\n".join(errors(exc))
    assert "unknown language 'COBOL'" in text
    assert "main-file is required" in text
    assert "at least one variable is required" in text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'name: "f"\nvariable {\n name: "X"\n type: FLOAT\n min: 0\n',
            "config.pb:5:8: <document>: missing '}' (at the end of the file)",
        ),
        (
            'name: "f"\nvariable {\n name: "X" type FLOAT }',
            "config.pb:3:17: <document>: expected ':' or '{' after 'type'",
        ),
        ('name: "f"\nname: "g"', "config.pb:2:1: <document>: field 'name' is given twice"),
        ('name: "f"\n  @', "config.pb:2:3: <document>: unexpected character '@'"),
        (
            'name: "f"\nvariable {\n name: "X"\n type: ENUM\n options: 3\n}',
            "config.pb:5:11: variable.X.options: options must be a non-empty list of strings",
        ),
        ('name: "f"\nvariable { type: FLOAT min: 0 max: 1 }', "config.pb:2:10: variable: a variable needs a name"),
    ],
)
def test_pb_errors_are_located(text: str, expected: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_config_pb(text, "config.pb")
    assert errors(exc) == [expected]


def test_a_directory_without_a_config(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"no config\.json or config\.pb"):
        load_experiment(tmp_path)
