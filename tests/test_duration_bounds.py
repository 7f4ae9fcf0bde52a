"""Durations beyond a year are refused at validation; a long one that is allowed runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.errors import SpecError
from dagflow.spec import parse_spec


def pipeline(timeout: str) -> str:
    return textwrap.dedent(f"""\
        name: x
        steps:
          a:
            command: [sh, -c, 'sleep 1; echo done']
            timeout: {timeout}
        """)


def dagflow(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, env=cli_env(),
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("timeout", ["99999999999999999999d", "367d", "31622401", ".inf", "1.0e+400"])
def test_a_timeout_beyond_366_days_is_refused(timeout: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(pipeline(timeout), "p.yaml")
    [message] = [d.render() for d in caught.value.diagnostics]
    assert message.startswith("p.yaml:5:14: steps.a.timeout: "), message
    assert "366 days" in message


@pytest.mark.parametrize("timeout", ["366d", "31622400", "8784h"])
def test_a_timeout_of_366_days_is_accepted(timeout: str) -> None:
    assert parse_spec(pipeline(timeout), "p.yaml").model.steps["a"].timeout == 366 * 86400


def test_validate_exits_2_on_a_huge_timeout(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(pipeline("99999999999999999999d"))
    result = dagflow(tmp_path, "validate", "p.yaml")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "p.yaml:5:14: steps.a.timeout: " in result.stderr
    assert "Traceback" not in result.stderr


def test_a_node_with_a_300_day_timeout_runs(tmp_path: Path) -> None:
    """Longer than a selector can wait in one call (about 24.8 days of milliseconds)."""
    (tmp_path / "p.yaml").write_text(pipeline("300d"))
    result = dagflow(tmp_path, "run", "p.yaml", "--run-id", "long")
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / ".dagflow" / "runs" / "long" / "logs" / "a.out").read_text() == "done\n"

