"""Shared-pool manners (#43 item 11) in the compiled files: accounting_group and accounting_group_user
from the pipeline's condor block or the flags (which win) become exactly those submit lines in every node's
submit file, the batch name the DAGMan job's; a hostile value (a newline, a quote, a `$(...)` macro)
is refused with a located error or a one-line one, exit 2, and never reaches a file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.condor_helpers import write
from tests.test_condor_submit import unreachable  # noqa: F401 (a fixture)

PIPELINE = """\
name: tiny
condor:
  accounting_group: group_ml
  batch_name: nightly
steps:
  hello:
    command: ["true"]
"""
HOSTILE = ["x\nqueue 100", 'a" || true || "', "$(HOME)", "group ml", "-x", "a\\"]


def _dagflow(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "dagflow", *args, "--runs-dir", str(cwd / "runs")]
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)


def _submit(tmp_path: Path, env: dict[str, str], *flags: str, run_id: str = "r1") -> subprocess.CompletedProcess[str]:
    return _dagflow("submit", "--engine", "condor", str(tmp_path / "pipeline.yaml"), "--run-id", run_id,
                    "--dry-run", "--json", "--data-mode", "shared", *flags, env=env, cwd=tmp_path)  # fmt: skip


@pytest.mark.slow
def test_the_manners_are_written_as_exactly_those_lines(tmp_path: Path, unreachable: dict[str, str]) -> None:  # noqa: F811
    write(tmp_path / "pipeline.yaml", PIPELINE)
    done = _submit(tmp_path, unreachable, "--accounting-group-user", "alice")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "runs" / "r1" / "condor" / "hello.sub").read_text()
    lines = [line for line in text.splitlines() if line.startswith("accounting_group")]
    assert lines == ["accounting_group         = group_ml", "accounting_group_user    = alice"], text
    assert 'My.JobBatchName = "nightly"' in json.loads(done.stdout)["description"]
    flagged = _submit(tmp_path, unreachable, "--accounting-group", "group_cv", "--batch-name", "b2", run_id="r2")
    assert flagged.returncode == 0, flagged.stderr
    assert "accounting_group         = group_cv" in (tmp_path / "runs" / "r2" / "condor" / "hello.sub").read_text()
    assert 'My.JobBatchName = "b2"' in json.loads(flagged.stdout)["description"]


@pytest.mark.slow
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_flag_value_is_refused_and_writes_nothing(
    tmp_path: Path, unreachable: dict[str, str], value: str  # noqa: F811
) -> None:
    write(tmp_path / "pipeline.yaml", PIPELINE)
    for flag in ("--accounting-group", "--accounting-group-user", "--batch-name"):
        done = _submit(tmp_path, unreachable, f"{flag}={value}", run_id="hostile")
        assert done.returncode == 2, done.stdout + done.stderr
        assert "may hold only letters, digits" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert not (tmp_path / "runs" / "hostile").exists()


@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_pipeline_value_is_a_located_error(tmp_path: Path, value: str) -> None:
    for field in ("accounting_group", "accounting_group_user", "batch_name"):
        pipeline = f"name: tiny\ncondor:\n  {field}: {json.dumps(value)}\nsteps:\n  hello:\n    command: ['true']\n"
        write(tmp_path / "pipeline.yaml", pipeline)
        done = subprocess.run([sys.executable, "-m", "dagflow", "validate", "pipeline.yaml", "--engine", "condor"],
                              cwd=tmp_path, capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 2, done.stdout + done.stderr
        assert "pipeline.yaml:3:" in done.stderr and f"condor.{field}" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
