"""The test Grid Engine cluster itself (scripts/sge-cluster.sh, tests/sge_fixtures.py): a plain job, an array,
the fake `gpu` consumable, -hold_jid ordering and qdel, through the real qsub/qstat/qacct/qdel commands.

Waits are generous (minutes): the cluster shares a 2-core machine with other test clusters, and qacct lags up
to 15 s behind a job's end.
"""

from __future__ import annotations

import shlex
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("sge_cluster")

WAIT_S = 180.0


def run(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=60)
    if done.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")
    return done


def qsub(*args: str) -> str:
    """Submit with -terse; the job number (an array answers "23.1-4:1")."""
    return run("qsub", "-terse", *args).stdout.strip().split(".")[0]


def job_states() -> dict[str, str]:
    """Job number -> state letters (qw, hqw, r, Eqw...) of every job qstat knows, all users, all tasks."""
    root = ET.fromstring(run("qstat", "-u", "*", "-xml").stdout)
    states: dict[str, str] = {}
    for job in root.iter("job_list"):
        number, state = job.findtext("JB_job_number"), job.findtext("state")
        if number is not None:
            states[number] = state or ""
    return states


def wait_gone(job: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while job in job_states():
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job} still in qstat after {timeout:.0f} s: {job_states().get(job)}")
        time.sleep(0.5)


def exit_statuses(job: str, tasks: int = 1, timeout: float = WAIT_S) -> list[int]:
    """The exit_status of each of the job's tasks from qacct, once it has all of them."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(["qacct", "-j", job], capture_output=True, text=True, check=False, timeout=60)
        statuses = [int(line.split()[1]) for line in done.stdout.splitlines() if line.startswith("exit_status")]
        if done.returncode == 0 and len(statuses) >= tasks:
            return statuses
        if time.monotonic() > deadline:
            raise AssertionError(f"qacct has {len(statuses)} of {tasks} records of job {job}: {done.stderr}")
        time.sleep(1)


def out_options(tmp_path: Path, name: str) -> list[str]:
    return ["-wd", str(tmp_path), "-o", str(tmp_path / name), "-j", "y"]


def test_plain_job_runs_and_is_accounted(tmp_path: Path) -> None:
    # Separate arguments: qsub -b y 'echo hello' as one word fails in 8.1.9.
    job = qsub("-b", "y", *out_options(tmp_path, "plain.out"), "echo", "hello")
    wait_gone(job)
    assert (tmp_path / "plain.out").read_text().strip() == "hello"
    assert exit_statuses(job) == [0]


def test_binary_job_arguments_go_through_a_shell(tmp_path: Path) -> None:
    # 8.1.9 joins a binary job's arguments with spaces and has /bin/sh parse the line again: each argument
    # needs shell quoting (shlex.quote), or `sh -c 'exit 3'` runs as `sh -c exit 3` and `a|b` becomes a pipe.
    argv = ["printf", "%s|", "a  b", "c"]
    job = qsub("-b", "y", *out_options(tmp_path, "argv.out"), *map(shlex.quote, argv))
    wait_gone(job)
    assert (tmp_path / "argv.out").read_text() == "a  b|c|"


def test_failing_job_exit_status_reaches_qacct(tmp_path: Path) -> None:
    job = qsub("-b", "y", *out_options(tmp_path, "fail.out"), "sh", "-c", shlex.quote("exit 3"))
    wait_gone(job)
    assert exit_statuses(job) == [3]


def test_array_runs_every_task(tmp_path: Path) -> None:
    # $TASK_ID in -o is Grid Engine's own placeholder, expanded per task.
    job = qsub("-t", "1-4", "-b", "y", "-wd", str(tmp_path), "-o", str(tmp_path / "task.$TASK_ID"), "-j", "y",
               "echo", "task")
    wait_gone(job)
    assert sorted(p.name for p in tmp_path.glob("task.*")) == [f"task.{i}" for i in range(1, 5)]
    assert exit_statuses(job, tasks=4) == [0, 0, 0, 0]


def test_gpu_consumable(tmp_path: Path) -> None:
    fits = qsub("-l", "gpu=1", "-b", "y", *out_options(tmp_path, "gpu1.out"), "true")
    too_many = qsub("-l", "gpu=5", "-b", "y", *out_options(tmp_path, "gpu5.out"), "true")
    try:
        wait_gone(fits)
        assert exit_statuses(fits) == [0]
        # Several scheduling intervals (1 s each) after the other one ran: still waiting, and qstat -j says why.
        time.sleep(5)
        assert job_states().get(too_many) == "qw"
        why = run("qstat", "-j", too_many).stdout
        assert "gpu" in why and "offers only" in why, why
    finally:
        subprocess.run(["qdel", too_many], capture_output=True, check=False)
    wait_gone(too_many)
    assert not (tmp_path / "gpu5.out").exists()


def test_hold_jid_orders_jobs(tmp_path: Path) -> None:
    order = tmp_path / "order"
    first_script = tmp_path / "first.sh"
    first_script.write_text(f"#!/bin/sh\nsleep 3\necho first >> {order}\n")
    second_script = tmp_path / "second.sh"
    second_script.write_text(f"#!/bin/sh\necho second >> {order}\n")
    first = qsub("-N", "first", *out_options(tmp_path, "first.out"), str(first_script))
    second = qsub("-N", "second", "-hold_jid", first, *out_options(tmp_path, "second.out"), str(second_script))
    states = job_states()
    if first in states:  # still queued or running: the dependant is held
        assert "h" in states.get(second, ""), states
    wait_gone(second)
    assert order.read_text().split() == ["first", "second"]
    assert exit_statuses(first) == [0]
    assert exit_statuses(second) == [0]


def test_qdel_removes_a_queued_job(tmp_path: Path) -> None:
    # -h: a user hold keeps it queued (hqw) until qdel.
    job = qsub("-h", "-b", "y", *out_options(tmp_path, "held.out"), "true")
    assert job_states().get(job) == "hqw"
    run("qdel", job)
    wait_gone(job, timeout=60)
    assert not (tmp_path / "held.out").exists()
