"""Run ids name directories: every command that takes one refuses a hostile id, the same way, before
writing anything."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_local_support import dagflow_cli

from dagflow.run.ids import RunIdError, new_run_id, validate_run_id

HOSTILE = {
    "newline": "abc\n",
    "inner-newline": "ab\ncd",
    "dotdot": "..",
    "escape": "../../../ESC",
    "slash": "a/b",
    "empty": "",
    "long": "a" * 201,
    "very-long": "x" * 100_000,
    "dash": "-rf",
    "dot": ".hidden",
    "latest": "latest",
    "space": "a b",
    "nul": "a\x00b",
}
PIPELINE = "name: p\nsteps:\n  a: {command: echo hi}\n"


@pytest.mark.parametrize("run_id", HOSTILE.values(), ids=HOSTILE.keys())
def test_validate_run_id_refuses_hostile_ids(run_id: str) -> None:
    with pytest.raises(RunIdError, match="invalid run id"):
        validate_run_id(run_id)


def test_a_long_id_is_shortened_in_the_message() -> None:
    with pytest.raises(RunIdError) as caught:
        validate_run_id("x" * 100_000)
    assert len(str(caught.value)) < 400
    assert "100000 characters" in str(caught.value)


@pytest.mark.parametrize("run_id", ["a", "run-1", "p.2025_03-01", "A" * 200, "new"])
def test_ordinary_ids_pass(run_id: str) -> None:
    run_id = new_run_id("ratings") if run_id == "new" else run_id  # made here: test ids must not vary
    assert validate_run_id(run_id) == run_id


def commands(pipeline: str, run_id: str) -> dict[str, list[str]]:
    option = f"--run-id={run_id}"  # the = form: an id starting with '-' must not be read as an option
    return {
        "run": ["run", pipeline, option],
        "run-json": ["run", pipeline, option, "--json"],
        "submit-local": ["submit", pipeline, "--engine", "local", option],
        "submit-slurm": ["submit", pipeline, "--engine", "slurm", option],
        "submit-condor": ["submit", pipeline, "--engine", "condor", "--dry-run", option],
        "compile": ["compile", pipeline, option],
        "plan": ["plan", pipeline, option],
        "search-name": ["search", "run", pipeline, f"--name={run_id}"],
        "promote": ["promote", "--metrics", "m.json", "--metric", "loss", "--better", "lower", "--than", "cur",
                    "--model", "new", option, "--node", "n"],
        "status": ["status", "--", run_id],
        "resume": ["run", f"--resume={run_id}"],
    }


def refused(command: str, result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 2, (command, result.returncode, result.stdout, result.stderr[-1500:])
    output = result.stdout + result.stderr
    assert "invalid run id" in output, (command, output[-1500:])
    assert "Traceback" not in output, command
    if command == "run-json":
        error = json.loads(result.stderr.strip().splitlines()[-1])
        assert error["exit_code"] == 2 and "invalid run id" in error["error"]


# The ids the red-team report names; the rest of HOSTILE is covered by validate_run_id's own test.
@pytest.mark.parametrize("name", ["newline", "dotdot", "escape", "slash", "empty", "very-long", "dash"])
@pytest.mark.slow
def test_every_command_refuses_a_hostile_run_id_and_writes_nothing(tmp_path: Path, name: str) -> None:
    work = tmp_path / "w1" / "w2" / "w3" / "w4"  # deep enough that ../../../ESC stays inside tmp_path
    work.mkdir(parents=True)
    (work / "pipeline.yaml").write_text(PIPELINE)
    run_id = HOSTILE[name]
    cases = {
        command: args
        for command, args in commands("pipeline.yaml", run_id).items()
        if not (command in ("status", "resume") and run_id == "")  # no id there means the latest run
    }
    with ThreadPoolExecutor(max_workers=4) as pool:  # real processes, a few at a time
        results = dict(zip(cases, pool.map(lambda args: dagflow_cli(*args, cwd=work), cases.values()), strict=True))
    for command, result in results.items():
        refused(command, result)
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["pipeline.yaml"]
    assert not any("ESC" in p.name for p in tmp_path.rglob("*"))
