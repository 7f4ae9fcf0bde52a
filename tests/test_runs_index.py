"""The user's index of runs (dagflow/run/index.py): `dagflow runs` lists runs of every pipeline directory used,
status/logs find a run by id or a unique prefix from any directory, and a failed submit never becomes
`latest`. Real processes, real files; each test has its own XDG_STATE_HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_local_support import cli_env

PIPELINE = "name: {name}\nsteps:\n  hello:\n    command: python -c \"print('hi from {name}')\"\n"


def _env(state: Path, **extra: str) -> dict[str, str]:
    return {**cli_env(), "XDG_STATE_HOME": str(state), **extra}


def _dagflow(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def _project(root: Path, name: str) -> Path:
    root.mkdir(parents=True)
    (root / "pipeline.yaml").write_text(PIPELINE.format(name=name), encoding="utf-8")
    return root


def test_runs_of_two_projects_are_listed_and_found_by_id_or_prefix_from_anywhere(tmp_path: Path) -> None:
    env = _env(tmp_path / "state")
    one, two, elsewhere = _project(tmp_path / "one", "alpha"), _project(tmp_path / "two", "beta"), tmp_path / "else"
    elsewhere.mkdir()
    for cwd, run_id in ((one, "alpha-1"), (two, "alpha-2"), (two, "beta-1")):
        assert _dagflow("run", "pipeline.yaml", "--run-id", run_id, cwd=cwd, env=env).returncode == 0

    listed = _dagflow("runs", "--json", cwd=elsewhere, env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {row["run_id"]: row for row in json.loads(listed.stdout)}
    assert set(rows) == {"alpha-1", "alpha-2", "beta-1"}
    assert rows["beta-1"] | {"started": "-"} == {
        "run_id": "beta-1", "pipeline": "beta", "engine": "local", "state": "succeeded", "started": "-",
        "run_dir": str(two / ".dagflow" / "runs" / "beta-1"),
    }
    table = _dagflow("runs", cwd=elsewhere, env=env).stdout
    assert table.splitlines()[0].split() == ["RUN", "PIPELINE", "ENGINE", "STATE", "STARTED", "WHERE"]

    status = _dagflow("status", "alpha-1", "--json", cwd=elsewhere, env=env)
    assert status.returncode == 0 and json.loads(status.stdout)["run_id"] == "alpha-1", status.stderr
    logs = _dagflow("logs", "bet", "hello", cwd=elsewhere, env=env)  # a unique prefix
    assert logs.returncode == 0 and logs.stdout == "hi from beta\n", logs.stderr

    ambiguous = _dagflow("status", "alpha", cwd=elsewhere, env=env)
    assert ambiguous.returncode == 2 and "Traceback" not in ambiguous.stderr
    assert "'alpha' names 2 runs" in ambiguous.stderr and "alpha-1" in ambiguous.stderr, ambiguous.stderr
    unknown = _dagflow("cancel", "gamma", cwd=elsewhere, env=env)
    assert unknown.returncode == 2 and "no run in the index of runs" in unknown.stderr, unknown.stderr
    assert "Traceback" not in unknown.stderr
    # From its own directory, an id is that directory's run first (as before the index).
    here = _dagflow("status", "alpha-2", "--json", cwd=two, env=env)
    assert json.loads(here.stdout)["run_id"] == "alpha-2"

    shutil.rmtree(two / ".dagflow" / "runs" / "beta-1")  # gone: dropped from the index when it is read
    rows = json.loads(_dagflow("runs", "--json", cwd=elsewhere, env=env).stdout)
    assert [row["run_id"] for row in rows] == ["alpha-1", "alpha-2"]
    index = (tmp_path / "state" / "dagflow" / "runs.jsonl").read_text(encoding="utf-8")
    assert "beta-1" not in index and "alpha-1" in index


WRITER = """
import sys
from pathlib import Path
from dagflow.run.index import note_run
root, count = Path(sys.argv[1]), int(sys.argv[2])
for number in range(count):
    run_dir = root / f"r{number}"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text("{}")
    note_run(run_dir, "p")
    if number % 2:
        gone = root / f"gone{number}"
        note_run(gone, "p")  # never made: each read that sees it rewrites the index
"""

READER = """
import sys
from dagflow.run.index import indexed_runs
for _ in range(int(sys.argv[1])):
    indexed_runs()
"""


def test_two_processes_at_once_lose_no_entry(tmp_path: Path) -> None:
    """Writers append while readers rewrite the index (dropping runs that are gone): every run is kept."""
    env = _env(tmp_path / "state")
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / f"w{n}"), "40"], env=env) for n in range(3)]
    procs += [subprocess.Popen([sys.executable, "-c", READER, "60"], env=env) for _ in range(2)]
    assert [proc.wait(timeout=300) for proc in procs] == [0] * 5
    listed = subprocess.run([sys.executable, "-c", "from dagflow.run.index import indexed_runs\n"
                             "print('\\n'.join(entry.dir for entry in indexed_runs()))"],
                            env=env, capture_output=True, text=True, check=True).stdout.split()
    assert sorted(listed) == sorted(str(tmp_path / f"w{n}" / f"r{i}") for n in range(3) for i in range(40))


def test_an_unwritable_state_dir_costs_only_the_index(tmp_path: Path) -> None:
    (tmp_path / "state").write_text("not a directory")
    env = _env(tmp_path / "state")
    project = _project(tmp_path / "p", "tiny")
    done = _dagflow("run", "pipeline.yaml", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert _dagflow("runs", "--json", cwd=project, env=env).stdout.strip() == "[]"


def test_a_submit_that_fails_never_becomes_latest(tmp_path: Path) -> None:
    """No schedd can be reached (exit 3): the compiled run is kept for `resubmit`, and `latest` is still the
    run that ran. Before the fix the failed run's directory was made `latest` as it was created."""
    env = {key: value for key, value in _env(tmp_path / "state").items() if not key.startswith(("CONDOR_", "_CONDOR_"))}
    env["HOME"] = str(tmp_path)
    project = _project(tmp_path / "p", "tiny")
    assert _dagflow("run", "pipeline.yaml", "--run-id", "real", cwd=project, env=env).returncode == 0
    failed = _dagflow("submit", "pipeline.yaml", "--run-id", "unsent", "--data-mode", "shared", cwd=project, env=env)
    assert failed.returncode == 3, failed.stderr
    runs = project / ".dagflow" / "runs"
    assert (runs / "unsent" / "plan.json").is_file()
    assert (runs / "LATEST").read_text() == "real\n"
    status = _dagflow("status", "--json", cwd=project, env=env)
    assert json.loads(status.stdout)["run_id"] == "real", status.stderr
    # It is still a run of its own, found by id, and listed.
    assert json.loads(_dagflow("status", "unsent", "--json", cwd=project, env=env).stdout)["run_id"] == "unsent"
    assert "unsent" in {row["run_id"] for row in json.loads(_dagflow("runs", "--json", cwd=project, env=env).stdout)}


def test_the_index_follows_xdg_state_home_and_defaults_to_local_state(tmp_path: Path) -> None:
    code = "from dagflow.run.index import state_dir; print(state_dir())"
    for given, expected in ((str(tmp_path / "s"), tmp_path / "s" / "dagflow"),
                            ("", tmp_path / ".local" / "state" / "dagflow"),
                            ("relative/ignored", tmp_path / ".local" / "state" / "dagflow")):
        env = {**os.environ, "HOME": str(tmp_path), "XDG_STATE_HOME": given}
        shown = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert shown.stdout.strip() == str(expected)
