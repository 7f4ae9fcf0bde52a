"""The command line's own surface: --version, shell completion, and --json errors as one JSON object."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib.metadata import version
from pathlib import Path

import pytest
from test_local_support import cli_env, dagflow_cli

BAD_PIPELINE = "name: p\nsteps:\n  a: {command: echo, needs: [b]}\n"


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    result = dagflow_cli("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"dagflow {version('dagflow')}\n"


def test_completion_script_and_completions(tmp_path: Path) -> None:
    script = dagflow_cli("--show-completion", "bash", cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    assert "_DAGFLOW_COMPLETE=complete_bash" in script.stdout
    env = {**cli_env(), "_DAGFLOW_COMPLETE": "complete_bash", "COMP_WORDS": "dagflow vali", "COMP_CWORD": "1"}
    completed = subprocess.run([sys.executable, "-m", "dagflow"], cwd=tmp_path, env=env, capture_output=True,
                               text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["validate"]
    assert "--install-completion" in dagflow_cli("--help", cwd=tmp_path).stdout


def json_error(result: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # one object, nothing else
    error = json.loads(lines[0])
    assert set(error) >= {"error", "exit_code", "where"}
    assert error["exit_code"] == result.returncode != 0
    return error


@pytest.mark.slow
def test_every_error_with_json_is_one_json_object(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_PIPELINE)
    cases: dict[str, list[str]] = {
        "run: invalid pipeline": ["run", "bad.yaml", "--json"],
        "run: missing file": ["run", "missing.yaml", "--json"],
        "run: bad option value": ["run", "bad.yaml", "--json", "--jobs", "0"],
        "run: unknown option": ["run", "bad.yaml", "--json", "--nope"],
        "run: hostile run id": ["run", "bad.yaml", "--json", "--run-id=a/b"],
        "status: no run": ["status", "nope", "--json"],
        "submit: no pipeline": ["submit", "--engine", "local", "--json"],
        "cancel: no run": ["cancel", "nope", "--json"],
        "resubmit: no run": ["resubmit", "nope", "--json"],
        "search status: no db": ["search", "status", "--json", "--db", "none.db"],
        "plan: invalid pipeline": ["plan", "bad.yaml", "--json"],
        "plan: --json and --dot": ["plan", "bad.yaml", "--json", "--dot"],
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = dict(zip(cases, pool.map(lambda args: dagflow_cli(*args, cwd=tmp_path), cases.values()), strict=True))
    errors = {name: json_error(result) for name, result in results.items()}
    spec_error = errors["plan: invalid pipeline"]
    assert spec_error["where"] == "bad.yaml:3:30"
    assert spec_error["exit_code"] == 2
    assert "needs 'b', but there is no step of that name" in str(spec_error["error"])
    [diagnostic] = spec_error["diagnostics"]  # type: ignore[misc]
    assert diagnostic["field"] == "steps.a.needs[0]" and diagnostic["line"] == 3
    assert errors["run: invalid pipeline"]["where"] == "bad.yaml:3:30"
    assert "no run 'nope'" in str(errors["status: no run"]["error"])
    assert "--jobs" in str(errors["run: bad option value"]["error"])
    assert "invalid run id" in str(errors["run: hostile run id"]["error"])
    assert "choose one of --json and --dot" in str(errors["plan: --json and --dot"]["error"])


def test_errors_without_json_stay_plain_text(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(BAD_PIPELINE)
    result = dagflow_cli("plan", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith("bad.yaml:3:30: steps.a.needs[0]: needs 'b'")
    status = dagflow_cli("status", "nope", cwd=tmp_path)
    assert status.returncode == 2 and status.stderr.startswith("error: no run 'nope'")


@pytest.mark.slow
def test_json_errors_do_not_leak_into_the_next_command_in_one_process(tmp_path: Path) -> None:
    """Commands invoked in-process (as CliRunner does) must not inherit an earlier command's --json."""
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from dagflow.cli import app\n"
        "runner = CliRunner()\n"
        "first = runner.invoke(app, ['status', 'nope', '--json'])\n"
        "second = runner.invoke(app, ['status', 'nope'])\n"
        "print(repr(first.stderr)); print(repr(second.stderr))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=cli_env(), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert '"error"' in first and "error: no run 'nope'" in second


@pytest.mark.slow
def test_an_unreachable_schedd_with_json_is_one_json_object(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello: {command: echo hi}\n")
    env = {**cli_env(), "CONDOR_CONFIG": "/dev/null"}  # no schedd anywhere
    result = subprocess.run([sys.executable, "-m", "dagflow", "submit", "p.yaml", "--json"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
    error = json_error(result)
    assert error["exit_code"] == 3 and "compiled files kept in" in str(error["error"])
