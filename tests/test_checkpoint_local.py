"""The checkpoint contract on the local engine, with real processes: a node that exits with its step's
checkpoint code runs again from its checkpoint files, no failed attempt is counted, restarts are capped,
and a runner killed with kill -9 while such a node is between restarts loses neither the checkpoint nor
an attempt (the resume takes the recorded exit as a checkpoint and goes on)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_local_support import cli_env, dagflow_cli

from dagflow.run.journal import read_journal
from tests.checkpoint_support import epochs, write_train

PIPELINE = """\
name: ckpt
steps:
  train:
    kind: train
    command: python train.py {epochs} {seconds}
    retries: {retries}
    checkpoint: {{files: [ckpt/], exit_code: 85{extra}}}
"""


def pipeline(tmp_path: Path, epochs_: int, seconds: float = 0.05, retries: int = 0, extra: str = "") -> None:
    write_train(tmp_path)
    text = PIPELINE.format(epochs=epochs_, seconds=seconds, retries=retries, extra=extra)
    (tmp_path / "pipeline.yaml").write_text(text, encoding="utf-8")


def status(tmp_path: Path, run_id: str) -> dict:
    done = dagflow_cli("status", run_id, "--json", cwd=tmp_path)
    return json.loads(done.stdout)


def train_record(tmp_path: Path, run_id: str) -> dict:
    return next(node for node in status(tmp_path, run_id)["nodes"] if node["node"] == "train")


def test_each_checkpoint_exit_restarts_the_node_without_using_a_retry(tmp_path: Path) -> None:
    pipeline(tmp_path, epochs_=5, retries=0)
    done = dagflow_cli("run", "pipeline.yaml", "--run-id", "ck", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4, 5]  # every epoch once, none repeated
    record = train_record(tmp_path, "ck")
    assert (record["state"], record["attempts"], record["restarts"]) == ("succeeded", 1, 4)
    journal = (tmp_path / ".dagflow" / "runs" / "ck" / "journal.jsonl").read_text().splitlines()
    ends = [json.loads(line) for line in journal if '"e":"end"' in line]
    assert [(end["s"], end["rc"]) for end in ends] == [("checkpointed", 85)] * 4 + [("succeeded", 0)]
    assert "restarting from its checkpoint" in done.stdout and "failed" not in done.stdout


def test_a_real_failure_still_uses_retries_and_the_checkpoint_survives_it(tmp_path: Path) -> None:
    # train.py crashes once (exit 3) at epoch 3 before writing its checkpoint: one retry, then it goes on.
    pipeline(tmp_path, epochs_=4, retries=1)
    script = tmp_path / "train.py"
    crash = 'if epoch == 3 and not os.path.exists("crashed"):\n    open("crashed", "w").close()\n    sys.exit(3)\n'
    script.write_text(script.read_text().replace("time.sleep(seconds)\n", "time.sleep(seconds)\n" + crash))
    done = dagflow_cli("run", "pipeline.yaml", "--run-id", "ck", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]
    record = train_record(tmp_path, "ck")
    assert (record["state"], record["attempts"], record["restarts"]) == ("succeeded", 2, 3)


def test_restarts_are_capped_so_a_script_that_always_checkpoints_fails(tmp_path: Path) -> None:
    pipeline(tmp_path, epochs_=1000, retries=0, extra=", max_restarts: 3")
    done = dagflow_cli("run", "pipeline.yaml", "--run-id", "ck", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]  # the first run and 3 restarts
    record = train_record(tmp_path, "ck")
    assert (record["state"], record["exit_code"], record["restarts"]) == ("failed", 85, 3)


def wait_for(path: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"timed out waiting for {path}"
        time.sleep(0.05)


@pytest.mark.slow
def test_runner_killed_while_a_node_checkpoints_resumes_from_the_checkpoint_without_a_failure(
    tmp_path: Path,
) -> None:
    pipeline(tmp_path, epochs_=5, retries=0)
    env = {**cli_env(), "EPOCH_PAUSE_AT": "2", "EPOCH_WITNESS": str(tmp_path / "started.log")}
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--run-id", "ck"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(tmp_path / "paused")  # epoch 2 is checkpointed; the node is about to exit 85
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    (tmp_path / "go").touch()  # it exits 85 while no runner is alive; its keeper records the exit
    journal = tmp_path / ".dagflow" / "runs" / "ck" / "journal.jsonl"
    procs = tmp_path / ".dagflow" / "runs" / "ck" / "procs.jsonl"
    deadline = time.monotonic() + 60
    while '"rc":85' not in procs.read_text().replace(" ", ""):
        assert time.monotonic() < deadline, procs.read_text()
        time.sleep(0.05)
    assert read_journal(journal).nodes["train"].state == "running"  # the runner never saw the exit
    resumed = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "--resume", "ck"],
        cwd=tmp_path, env={**env, "EPOCH_PAUSE_AT": ""}, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4, 5]
    assert epochs(tmp_path / "started.log") == [1, 2, 3, 4, 5]  # no epoch started twice
    record = train_record(tmp_path, "ck")
    assert (record["state"], record["attempts"], record["restarts"]) == ("succeeded", 1, 4)


@pytest.mark.slow
def test_the_restart_cap_counts_restarts_from_before_a_resume(tmp_path: Path) -> None:
    pipeline(tmp_path, epochs_=1000, retries=0, extra=", max_restarts: 3")
    env = {**cli_env(), "EPOCH_PAUSE_AT": "3"}
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--run-id", "ck"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(tmp_path / "paused")  # two restarts journaled, the third process has checkpointed epoch 3
    journal = tmp_path / ".dagflow" / "runs" / "ck" / "journal.jsonl"
    assert read_journal(journal).nodes["train"].restarts == 2
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    (tmp_path / "go").touch()
    resumed = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "--resume", "ck"],
        cwd=tmp_path, env={**env, "EPOCH_PAUSE_AT": ""}, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]  # restart 3 ran epoch 4, then the cap
    record = train_record(tmp_path, "ck")
    assert (record["state"], record["restarts"], record["attempts"]) == ("failed", 3, 1)


@pytest.mark.slow
def test_runner_and_keeper_killed_while_a_node_checkpoints_reruns_it_from_the_checkpoint(tmp_path: Path) -> None:
    # Nothing records the node's checkpoint exit (its keeper is gone too): the resume reruns the node,
    # which resumes from the checkpoint files it left; no retry is used (retries: 0).
    pipeline(tmp_path, epochs_=4, retries=0)
    env = {**cli_env(), "EPOCH_PAUSE_AT": "2", "EPOCH_WITNESS": str(tmp_path / "started.log")}
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--run-id", "ck"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    wait_for(tmp_path / "paused")
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    procs = tmp_path / ".dagflow" / "runs" / "ck" / "procs.jsonl"
    warden = next(json.loads(line)["k"] for line in procs.read_text().splitlines() if '"k"' in line)
    keepers = [warden, *map(int, Path(f"/proc/{warden}/task/{warden}/children").read_text().split())]
    for pid in keepers:  # the keeper and its warden: nothing is left to record the node's exit
        os.kill(pid, signal.SIGKILL)
    (tmp_path / "go").touch()  # the node exits 85 with nobody left to record it
    resumed = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "--resume", "ck"],
        cwd=tmp_path, env={**env, "EPOCH_PAUSE_AT": ""}, capture_output=True, text=True, timeout=120,
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]  # epoch 2's checkpoint was kept
    assert epochs(tmp_path / "started.log") == [1, 2, 3, 4]  # and nothing was repeated
    assert train_record(tmp_path, "ck")["state"] == "succeeded"
