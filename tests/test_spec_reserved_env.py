"""A step's env cannot set DAGFLOW_* names: dagflow sets them itself and recognises its own nodes by them."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.errors import SpecError
from dagflow.spec import parse_spec

PIPELINE = textwrap.dedent("""\
    name: x
    steps:
      a:
        command: echo hi
        env:
          MY_VAR: fine
          DAGFLOW_RUN_ID: mine
    """)


def test_a_dagflow_name_in_env_is_refused_at_its_key() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(PIPELINE, "p.yaml")
    [message] = [d.render() for d in caught.value.diagnostics]
    assert message.startswith("p.yaml:7:7: steps.a.env.DAGFLOW_RUN_ID: "), message
    assert "reserved for dagflow" in message


def test_other_env_names_are_accepted() -> None:
    spec = parse_spec(PIPELINE.replace("DAGFLOW_RUN_ID", "DAGFLOWISH").replace("MY_VAR", "dagflow_run_id"), "p.yaml")
    assert set(spec.model.steps["a"].env) == {"DAGFLOWISH", "dagflow_run_id"}


def test_validate_exits_2_on_a_dagflow_name_in_env(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    result = subprocess.run([sys.executable, "-m", "dagflow", "validate", "p.yaml"], cwd=tmp_path, env=cli_env(),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "p.yaml:7:7: steps.a.env.DAGFLOW_RUN_ID: " in result.stderr
    assert "Traceback" not in result.stderr
