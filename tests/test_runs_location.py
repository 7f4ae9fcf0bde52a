"""Where runs live and how commands find them: a run is kept beside its pipeline file (`DIR/.dagflow/runs`),
whatever directory `dagflow run DIR/pipeline.yaml` was typed in, and status, logs, report, resubmit and
cancel find it both from that directory and from the pipeline's. Through the CLI, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_local_support import dagflow_cli

PIPELINE = """\
name: located
steps:
  hello:
    command: [python, -c, "print('hello from the node')"]
  after:
    needs: [hello]
    command: [python, -c, "pass"]
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A repository-like root with the pipeline in proj/; nothing run yet."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "pipeline.yaml").write_text(PIPELINE)
    return tmp_path


def _ran_from_root(root: Path) -> None:
    done = dagflow_cli("run", "proj/pipeline.yaml", "--run-id", "r1", cwd=root)
    assert done.returncode == 0, done.stderr


def test_a_run_typed_elsewhere_is_kept_beside_its_pipeline(root: Path) -> None:
    _ran_from_root(root)
    assert (root / "proj" / ".dagflow" / "runs" / "r1" / "plan.json").is_file()
    assert not (root / ".dagflow" / "runs" / "r1").exists()


@pytest.mark.slow
def test_commands_find_the_run_from_the_pipeline_directory(root: Path) -> None:
    _ran_from_root(root)
    proj = root / "proj"
    status = dagflow_cli("status", cwd=proj)
    assert status.returncode == 0, status.stderr
    assert "run r1" in status.stdout
    assert json.loads(dagflow_cli("status", "r1", "--json", cwd=proj).stdout)["state"] == "succeeded"
    logs = dagflow_cli("logs", "r1", "hello", cwd=proj)
    assert logs.returncode == 0 and logs.stdout == "hello from the node\n", logs.stderr
    report = dagflow_cli("report", "r1", cwd=proj)
    assert report.returncode == 0, report.stderr
    assert (proj / ".dagflow" / "runs" / "r1" / "report.html").is_file()
    for command in (["resubmit", "r1"], ["cancel", "r1"]):  # a finished run: found, then nothing to do
        result = dagflow_cli(*command, cwd=proj)
        assert "no run" not in result.stderr and "Traceback" not in result.stderr, (command, result.stderr)


@pytest.mark.slow
def test_commands_find_the_run_from_where_it_was_typed(root: Path) -> None:
    _ran_from_root(root)
    status = dagflow_cli("status", cwd=root)
    assert status.returncode == 0, status.stderr
    assert "run r1" in status.stdout
    logs = dagflow_cli("logs", "latest", "hello", cwd=root)
    assert logs.returncode == 0 and logs.stdout == "hello from the node\n", logs.stderr


@pytest.mark.slow
def test_the_cache_is_the_pipelines_wherever_the_command_is_typed(root: Path) -> None:
    _ran_from_root(root)
    again = dagflow_cli("run", "pipeline.yaml", "--run-id", "r2", cwd=root / "proj")
    assert again.returncode == 0, again.stderr
    status = json.loads(dagflow_cli("status", "r2", "--json", cwd=root).stdout)
    states = {node["node"]: node["state"] for node in status["nodes"]}
    assert states == {"hello": "cached", "after": "cached"}


@pytest.mark.slow
def test_no_run_found_says_where_it_looked_and_how_to_point_elsewhere(root: Path) -> None:
    for args in (["status"], ["status", "nope"], ["logs", "nope", "hello"], ["report"], ["cancel"], ["resubmit"]):
        result = dagflow_cli(*args, cwd=root)
        assert result.returncode == 2, (args, result.stderr)
        assert str(root / ".dagflow" / "runs") in result.stderr, (args, result.stderr)
        assert "--runs-dir" in result.stderr and "beside" in result.stderr, (args, result.stderr)


@pytest.mark.slow
def test_an_explicit_runs_dir_is_where_the_run_goes_and_is_looked_for(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An index of runs of this test's own: the test process's index also holds other tests' runs named r3.
    monkeypatch.setenv("XDG_STATE_HOME", str(root / "state"))
    done = dagflow_cli("run", "proj/pipeline.yaml", "--run-id", "r3", "--runs-dir", "elsewhere", cwd=root)
    assert done.returncode == 0, done.stderr
    assert (root / "elsewhere" / "r3" / "plan.json").is_file()
    assert dagflow_cli("status", "r3", "--runs-dir", "elsewhere", cwd=root).returncode == 0
    # Not where runs go by default, but a run id is found from anywhere (the user's index of runs, #43 item 9).
    found = dagflow_cli("status", "r3", cwd=root)
    assert found.returncode == 0 and str(root / "elsewhere" / "r3") in found.stdout, found.stdout + found.stderr
