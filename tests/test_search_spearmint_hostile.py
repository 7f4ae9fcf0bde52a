"""Spearmint experiment directories nobody vetted, run for real with `dagflow search --spearmint DIR`:
each is refused with exit 2 and a message naming the config file (and the field), never a traceback,
and a main file outside the experiment directory is never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_search_scheduler_support import search_cli

VARIABLES = {"x": {"type": "FLOAT", "min": 0, "max": 1}}
PB_VARIABLE = 'variable { name: "x" type: FLOAT min: 0 max: 1 }\n'
MAIN = 'def main(job_id, params):\n    open("{marker}", "w").write("ran")\n    return 1.0\n'


def config_json(**fields: object) -> bytes:
    return json.dumps({"main-file": "f.py", "variables": VARIABLES, **fields}).encode()


def at(data: bytes, needle: bytes, nth: int = 1) -> str:
    """line:column of the nth occurrence of needle in data."""
    index = -1
    for _ in range(nth):
        index = data.index(needle, index + 1)
    line = data.count(b"\n", 0, index) + 1
    column = index - data.rfind(b"\n", 0, index)
    return f"{line}:{column}"


DEEP_JSON = config_json(chooser="CHOOSER").replace(b'"CHOOSER"', b"[" * 100_000 + b"]" * 100_000)
DEEP_PB = b'name: "f"\n' + PB_VARIABLE.encode() + b"resources {" * 10_000 + b"}" * 10_000 + b"\n"
LATIN_E = b"\xe9"  # é in Latin-1: not UTF-8
NOT_UTF8_JSON = b'{"main-file": "f.py",\n "experiment-name": "caf\xe9", "variables": {}}'
NOT_UTF8_PB = b'name: "f\xe9"\n' + PB_VARIABLE.encode()
HUGE_SIZE_JSON = config_json(variables={"x": {"type": "FLOAT", "size": 100_000_000, "min": 0, "max": 1}})
HUGE_SIZE_PB = b'name: "f"\nvariable { name: "x" type: FLOAT size: 100000000 min: 0 max: 1 }\n'
INFINITE_PB = b'name: "f"\nvariable { name: "x" type: FLOAT min: 0 max: 1e400 }\n'
WIDE_JSON = config_json(variables={f"v{i}": {"type": "FLOAT", "size": 600, "min": 0, "max": 1} for i in range(2)})
OUTSIDE = "/tmp/dagflow-test-outside-main.py"  # never created: the config is refused before anything runs
TASK_MAIN_UP = json.dumps(
    {"variables": VARIABLES, "tasks": {"main": {"type": "OBJECTIVE", "main-file": "../x.py"}}}
).encode()
QUOTED_UP = b'"../x.py"'
MAIN_UP_PB = b'name: "../x"\n' + PB_VARIABLE.encode()

CASES: dict[str, tuple[str, bytes, str]] = {
    # name: (config file, its bytes, what the message says after "<file>:")
    "json-deep": ("config.json", DEEP_JSON, f"{at(DEEP_JSON, b'[', 32)}: <document>: nested deeper than 32 levels"),
    "pb-deep": ("config.pb", DEEP_PB, f"{at(DEEP_PB, b'{', 33)}: <document>: nested deeper than 32 levels"),
    "json-not-utf8": (
        "config.json",
        NOT_UTF8_JSON,
        f"{at(NOT_UTF8_JSON, LATIN_E)}: <document>: not UTF-8 text (byte 0xe9)",
    ),
    "pb-not-utf8": ("config.pb", NOT_UTF8_PB, f"{at(NOT_UTF8_PB, LATIN_E)}: <document>: not UTF-8 text (byte 0xe9)"),
    "json-too-large": ("config.json", b" " * (2 << 20) + config_json(), " <document>: larger than 1 MiB"),
    "json-huge-size": (
        "config.json",
        HUGE_SIZE_JSON,
        f"{at(HUGE_SIZE_JSON, b'100000000')}: variables.x.size: size must be at most 1000, not 100000000",
    ),
    "pb-huge-size": (
        "config.pb",
        HUGE_SIZE_PB,
        f"{at(HUGE_SIZE_PB, b'100000000')}: variable.x.size: size must be at most 1000, not 100000000",
    ),
    "pb-infinite-max": (
        "config.pb",
        INFINITE_PB,
        f"{at(INFINITE_PB, b'1e400')}: variable.x.max: a bound must be a finite number, not inf",
    ),
    "json-dimensions": (
        "config.json",
        WIDE_JSON,
        f"{at(WIDE_JSON, b'{', 2)}: variables: 1200 dimensions in all (each element of a variable, each option",
    ),
    "json-name-slash": ("config.json", config_json(**{"experiment-name": "a/b"}), "1:"),
    "json-name-long": ("config.json", config_json(**{"experiment-name": "n" * 300}), "1:"),
    "json-main-up": ("config.json", config_json(**{"main-file": "../x.py"}), "1:15: main-file: '../x.py' is outside"),
    "json-main-absolute": (
        "config.json",
        config_json(**{"main-file": OUTSIDE}),
        f"1:15: main-file: '{OUTSIDE}' is outside",
    ),
    "json-task-main-up": (
        "config.json",
        TASK_MAIN_UP,
        f"{at(TASK_MAIN_UP, QUOTED_UP)}: tasks.main.main-file: '../x.py' is outside",
    ),
    "pb-main-up": ("config.pb", MAIN_UP_PB, "1:7: name: '../x.py' is outside"),
}
NAME_MESSAGE = "experiment-name: invalid run id"


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_hostile_experiment_is_refused_with_exit_2(tmp_path: Path, case: str) -> None:
    file_name, data, expected = CASES[case]
    directory = tmp_path / "experiment"
    directory.mkdir()
    marker = tmp_path / "main-ran"
    for main in (directory / "f.py", tmp_path / "x.py"):  # ../x.py is a main file that would run, if let
        main.write_text(MAIN.format(marker=marker))
    config = directory / file_name
    config.write_bytes(data)
    result = search_cli("--spearmint", str(directory), "--budget", "1", "--poll", "0.05", cwd=tmp_path, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert f"{config}:{expected}" in result.stderr, result.stderr[-3000:]
    if case.startswith("json-name"):
        assert NAME_MESSAGE in result.stderr
    assert not marker.exists()
    assert not (tmp_path / ".dagflow" / "runs").exists()
