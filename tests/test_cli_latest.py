"""`latest` is the user's most recent run: a search's trial runs never become it."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_search_scheduler_support import search_cli, write_pipeline

from dagflow.run.layout import LATEST_FILE


@pytest.mark.slow
def test_search_trials_do_not_become_latest(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=2, parallel=1)
    runs = tmp_path / ".dagflow" / "runs"
    runs.mkdir(parents=True)
    (runs / LATEST_FILE).write_text("my-own-run\n")
    result = search_cli("run", str(pipeline), "--poll", "0.05", "--seed", "1", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert (runs / "quad-t2" / "plan.json").is_file()
    assert (runs / LATEST_FILE).read_text() == "my-own-run\n"


@pytest.mark.slow
def test_a_dry_run_never_becomes_latest(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello:\n    command: python -c \"print('hi')\"\n")

    def dagflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True)

    ran = dagflow("run", "p.yaml", "--run-id", "real")
    assert ran.returncode == 0, ran.stderr
    dry = dagflow("submit", "p.yaml", "--run-id", "looked-at", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    runs = tmp_path / ".dagflow" / "runs"
    assert (runs / "looked-at" / "plan.json").is_file()
    status = dagflow("status", "--json")
    assert json.loads(status.stdout)["run_id"] == "real", status.stdout + status.stderr
    assert (runs / LATEST_FILE).read_text() == "real\n"
    (runs / LATEST_FILE).unlink()  # the fallback: the newest run directory that is a run of the user's
    status = dagflow("status", "--json")
    assert json.loads(status.stdout)["run_id"] == "real", status.stdout + status.stderr


@pytest.mark.slow
def test_a_dry_run_cut_short_never_becomes_latest(tmp_path: Path) -> None:
    """A dry run that dies after its run directory was made (here: its pipeline's hash cannot be written, after
    plan.json, as if it were killed there) is no more `latest` than one that finished."""
    import json
    import subprocess
    import sys

    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello:\n    command: python -c \"print('hi')\"\n")

    def dagflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True)

    assert dagflow("run", "p.yaml", "--run-id", "real").returncode == 0
    runs = tmp_path / ".dagflow" / "runs"
    (runs / "cut-short" / "pipeline.sha256").mkdir(parents=True)  # its write fails
    dry = dagflow("submit", "p.yaml", "--run-id", "cut-short", "--dry-run")
    assert dry.returncode != 0 and (runs / "cut-short" / "plan.json").is_file(), dry.stderr
    assert (runs / LATEST_FILE).read_text() == "real\n"
    for args in (("status", "--json"), ("status", "latest", "--json")):
        status = dagflow(*args)
        assert json.loads(status.stdout)["run_id"] == "real", status.stdout + status.stderr


def test_latest_is_never_a_dry_run_even_when_the_latest_file_names_one(tmp_path: Path) -> None:
    """A LATEST file naming a dry run (written by an older dagflow, or cut short) is not trusted."""
    from dagflow.run.layout import DRY_RUN_FILE, latest_run

    runs = tmp_path / "runs"
    for run_id in ("real", "looked-at"):
        (runs / run_id).mkdir(parents=True)
        (runs / run_id / "plan.json").write_text("{}")
    (runs / "looked-at" / DRY_RUN_FILE).touch()
    (runs / LATEST_FILE).write_text("looked-at\n")
    assert latest_run(runs).run_id == "real"


@pytest.mark.slow
def test_logs_of_a_cached_node_come_from_the_run_that_ran_it(tmp_path: Path) -> None:
    import subprocess
    import sys

    command = "python -c \"print('from the first run')\""
    (tmp_path / "p.yaml").write_text(f"name: tiny\nsteps:\n  hello:\n    command: {command}\n")

    def dagflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True)

    assert dagflow("run", "p.yaml", "--run-id", "first").returncode == 0
    assert dagflow("run", "p.yaml", "--run-id", "second").returncode == 0  # hello is cached here
    logs = dagflow("logs", "latest", "hello")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == "from the first run\n"
    assert "cached in run second: output of run first" in logs.stderr
    import shutil

    shutil.rmtree(tmp_path / ".dagflow" / "runs" / "first")
    gone = dagflow("logs", "second", "hello")
    assert gone.returncode == 2 and "no run" in gone.stderr and "Traceback" not in gone.stderr


def test_submit_local_refuses_a_gpu_this_machine_lacks(tmp_path: Path) -> None:
    import subprocess
    import sys

    from dagflow.engines.local.devices import present_devices

    if "7" in present_devices():
        return  # a machine with eight GPUs: GPU 7 is there
    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello: {command: echo hi}\n")
    done = subprocess.run([sys.executable, "-m", "dagflow", "submit", "p.yaml", "--engine", "local", "--gpus", "7"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2 and "no GPU 7 on this machine" in done.stderr, done.stderr
    assert not list(tmp_path.glob(".dagflow/runs/*/plan.json"))  # refused before a run was made


def _latest_writes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every write of a runs directory's `latest` pointer in this process, in order."""
    from dagflow.run import layout

    writes: list[bytes] = []
    write = layout.write_atomic

    def counted(path: Path, data: bytes, mode: int = 0o644) -> None:
        if Path(path).name == LATEST_FILE:
            writes.append(data)
        write(path, data, mode)

    monkeypatch.setattr(layout, "write_atomic", counted)
    return writes


def test_a_resumed_run_marks_latest_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`latest` has one owner, the run session's "the run started": a resumed local run used to write it twice
    (once as the session continued the run, once as the engine started it)."""
    import subprocess
    import sys

    from typer.testing import CliRunner

    from dagflow.cli import app

    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello:\n    command: python -c \"print('hi')\"\n")
    runs = tmp_path / ".dagflow" / "runs"
    for run_id in ("first", "second"):
        done = subprocess.run([sys.executable, "-m", "dagflow", "run", "p.yaml", "--run-id", run_id],
                              cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 0, done.stderr
    writes = _latest_writes(monkeypatch)
    resumed = CliRunner().invoke(app, ["run", "--resume", "first", "--runs-dir", str(runs)])
    assert resumed.exit_code == 0, resumed.output
    assert writes == [b"first\n"]
    assert (runs / LATEST_FILE).read_text() == "first\n"


def test_a_resubmit_that_fails_to_start_leaves_latest_alone(tmp_path: Path) -> None:
    """The local engine refuses a GPU this machine lacks as it launches a continued run: nothing started, so
    `latest` stays the run that ran last (the session used to mark the continued run before its launch)."""
    import subprocess
    import sys

    from dagflow.engines.local.devices import present_devices

    if "7" in present_devices():
        pytest.skip("a machine with eight GPUs: GPU 7 is there")
    (tmp_path / "p.yaml").write_text("name: tiny\nsteps:\n  hello:\n    command: python -c \"print('hi')\"\n")

    def dagflow(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, capture_output=True, text=True)

    for run_id in ("first", "second"):
        assert dagflow("run", "p.yaml", "--run-id", run_id).returncode == 0
    runs = tmp_path / ".dagflow" / "runs"
    refused = dagflow("resubmit", "first", "--gpus", "7")
    assert refused.returncode == 2 and "no GPU 7 on this machine" in refused.stderr, refused.stderr
    assert (runs / LATEST_FILE).read_text() == "second\n"
