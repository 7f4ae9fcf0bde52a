"""Integers too long for Python's int/str conversion limit (4,300 digits) in a pipeline file: a located
exit-2 error, however they are spelt (decimal, hex, octal, underscores, YAML 1.1 base 60)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

HEAD = "name: p\nsteps:\n  a:\n    command: echo {params.n}\nparams:\n  n: "


def validate(tmp_path: Path, literal: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "long.yaml").write_text(HEAD + literal + "\n")
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", "long.yaml"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "literal",
    [
        "1" * 5000,  # decimal: int() refuses it
        "-" + "9" * 4301,
        "1_" + "1" * 5000,
        "0x" + "f" * 4000,  # hex converts, but the value has about 4,800 decimal digits: no str() of it works
        "0" + "7" * 5000,  # YAML 1.1 octal
        "1" + ":59" * 3000,  # YAML 1.1 base 60: each part converts, the value has about 5,300 digits
    ],
    ids=["decimal", "negative", "underscores", "hex", "octal", "base60"],
)
def test_an_integer_past_the_conversion_limit_is_a_located_error(tmp_path: Path, literal: str) -> None:
    done = validate(tmp_path, literal)
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.startswith(
        "long.yaml:6:6: params.n: an integer longer than 4,300 digits (the limit per pipeline file)"
    ), done.stderr[:500]


def test_an_integer_of_4300_digits_still_reads(tmp_path: Path) -> None:
    done = validate(tmp_path, "9" * 4300)
    assert done.returncode == 0, done.stderr[-2000:]
