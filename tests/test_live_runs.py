"""A node runs in at most one live run at a time (dagflow/run/live_runs.py), on the local engine, through the
command line: a partial, superset or `--set` run beside a live run is refused naming the run, the shared nodes
and the command to follow or stop it; a crashed run blocks only runs that share its nodes; `dagflow cancel`
stops what a crashed run's keeper runs on; `resubmit` of a live run refuses up front (#40 items 1, 4, 5, 6, 8).

Every node records its start and end (with its pid) in `log` and waits, between the two, for a file named
`go.<node>` that the test writes: "while it runs" is a state the test holds, not a moment it sleeps for.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_local_resume_adopt import alive, wait_for
from test_local_support import cli_env, dagflow_cli

PIPELINE = """\
name: nightly
params: {alpha: 0.1}
matrix:
  region: [us, br]
steps:
  fetch: {command: [sh, node.sh, "fetch.{region}"]}
  train: {command: [sh, node.sh, "train.{region}", "{params.alpha}"], needs: [fetch]}
"""
NODE = 'echo "$1 start $$ $2" >> log; while [ ! -f "go.$1" ]; do sleep 0.05; done; echo "$1 end $$" >> log\n'
NODES = ("fetch.us", "fetch.br", "train.us", "train.br")


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    (tmp_path / "node.sh").write_text(NODE)
    yield tmp_path
    for name in NODES:  # a failed test leaves no node waiting for ever
        (tmp_path / f"go.{name}").touch()


def go(workdir: Path, *nodes: str) -> None:
    for name in nodes:
        (workdir / f"go.{name}").touch()


def events(workdir: Path) -> list[list[str]]:
    path = workdir / "log"
    return [line.split() for line in path.read_text().splitlines()] if path.exists() else []


def starts(workdir: Path, node: str) -> list[int]:
    return [int(event[2]) for event in events(workdir) if event[:2] == [node, "start"]]


def running(workdir: Path, node: str) -> bool:
    pids = starts(workdir, node)
    return bool(pids) and alive(pids[-1])


def runs(workdir: Path) -> list[str]:
    root = workdir / ".dagflow" / "runs"
    return sorted(entry.name for entry in root.iterdir() if (entry / "plan.json").exists()) if root.exists() else []


def start(workdir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--kill-grace", "0.5", *args],
        cwd=workdir, env=cli_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def kill_9(runner: subprocess.Popen[str]) -> None:
    os.kill(runner.pid, signal.SIGKILL)
    runner.wait(timeout=60)


def refused(done: subprocess.CompletedProcess[str], run_id: str, *nodes: str) -> str:
    """done was refused as a second live run: exit 2, one message naming the run, the nodes and the way out."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and f"run {run_id} of " in done.stderr, done.stderr
    assert f"dagflow cancel {run_id}" in done.stderr, done.stderr
    for node in nodes:
        assert node in done.stderr, done.stderr
    return done.stderr


def states(workdir: Path, run_id: str) -> dict[str, str]:
    status = json.loads(dagflow_cli("status", run_id, "--json", cwd=workdir).stdout)
    return {node["node"]: node["state"] for node in status["nodes"]}


def test_a_partial_run_beside_a_live_run_is_refused_and_so_is_a_superset(workdir: Path) -> None:
    """Item 1: `--only region=us` while the nightly run has fetch.us running; then the other way round."""
    nightly = start(workdir)
    wait_for(lambda: running(workdir, "fetch.us"))
    (run_id,) = runs(workdir)
    partial = dagflow_cli("run", "pipeline.yaml", "--only", "region=us", cwd=workdir)
    text = refused(partial, run_id, "fetch.us", "train.us")
    assert "is running now (runner pid" in text and "fetch.br" not in text, text
    assert len(starts(workdir, "fetch.us")) == 1 and runs(workdir) == [run_id]
    go(workdir, *NODES)
    assert nightly.wait(timeout=120) == 0

    for name in NODES:
        (workdir / f"go.{name}").unlink()
    us = start(workdir, "--only", "region=us", "--force", "fetch")  # a new live run of the us nodes
    wait_for(lambda: len(starts(workdir, "fetch.us")) == 2 and running(workdir, "fetch.us"))
    (us_id,) = [name for name in runs(workdir) if name != run_id]  # ids of one second sort by their random tail
    whole = dagflow_cli("run", "pipeline.yaml", "--force", "fetch", cwd=workdir)
    refused(whole, us_id, "fetch.us")
    assert len(starts(workdir, "fetch.br")) == 1, "the superset started a node beside the live run"
    go(workdir, *NODES)
    assert us.wait(timeout=120) == 0
    assert (len(starts(workdir, "fetch.us")), len(starts(workdir, "fetch.br"))) == (2, 1)


def test_a_crashed_region_blocks_only_runs_of_its_own_nodes(workdir: Path) -> None:
    """Item 4: per-region firings. The us run is killed while fetch.us runs; the br firing runs anyway, before
    and after fetch.us ends; a second crashed region does not block the first; each continues its own run."""
    us = start(workdir, "--only", "region=us")
    wait_for(lambda: running(workdir, "fetch.us"))
    kill_9(us)
    (us_id,) = runs(workdir)
    br = start(workdir, "--only", "region=br")
    wait_for(lambda: running(workdir, "fetch.br"))
    kill_9(br)
    (br_id,) = set(runs(workdir)) - {us_id}  # run ids started within one second need not sort by start
    assert running(workdir, "fetch.us")

    go(workdir, "fetch.us")  # the crashed us node ends: its result waits, unrecorded, for its run
    wait_for(lambda: not running(workdir, "fetch.us"))
    go(workdir, "train.us", "fetch.br", "train.br")
    again_us = dagflow_cli("run", "pipeline.yaml", "--only", "region=us", "--kill-grace", "0.5", cwd=workdir)
    assert again_us.returncode == 0, again_us.stdout + again_us.stderr
    assert f"run {us_id} of " in again_us.stderr and "continuing that run" in again_us.stderr
    again_br = dagflow_cli("run", "pipeline.yaml", "--only", "region=br", "--kill-grace", "0.5", cwd=workdir)
    assert again_br.returncode == 0, again_br.stdout + again_br.stderr
    assert runs(workdir) == sorted([us_id, br_id])
    assert [len(starts(workdir, name)) for name in NODES] == [1, 1, 1, 1], events(workdir)
    assert states(workdir, us_id) == {"fetch.us": "succeeded", "train.us": "succeeded"}


def test_a_second_cancel_of_a_crashed_run_waits_for_the_first_and_signals_no_cancel(tmp_path: Path) -> None:
    """Two `dagflow cancel` at once on a run whose runner died: the first holds the run's lock while its node,
    which ignores SIGTERM, waits out the kill grace; the second waits for it instead of signalling it as the
    run's driver (which killed the first cancel half-way and left the node running)."""
    (tmp_path / "pipeline.yaml").write_text(
        "name: stubborn\nsteps:\n"
        "  hold: {command: [sh, -c, \"trap '' TERM; echo $$ > pid; while :; do sleep 0.05; done\"]}\n"
    )
    runner = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml", "--kill-grace", "15"], cwd=tmp_path, env=cli_env(),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    pid_file = tmp_path / "pid"
    wait_for(lambda: pid_file.exists() and pid_file.read_text().strip().isdigit())
    node = int(pid_file.read_text())
    kill_9(runner)  # type: ignore[arg-type]
    (run_id,) = runs(tmp_path)
    lock = tmp_path / ".dagflow" / "runs" / run_id / "runner.lock"
    first = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "cancel", run_id], cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    wait_for(lambda: lock.exists() and lock.read_text().split()[:1] == [str(first.pid)])  # it stops the node
    second = dagflow_cli("cancel", run_id, cwd=tmp_path)
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0, (first.returncode, out, err)
    assert f"stopped 1 node of run {run_id}" in out, out
    assert second.returncode == 0, second.stdout + second.stderr
    assert "another `dagflow cancel`" in second.stderr and "nothing to stop" in second.stdout, second.stderr
    assert not alive(node), "the cancelled node runs on"
    assert states(tmp_path, run_id) == {"hold": "interrupted"}

def test_cancel_of_a_crashed_run_stops_the_nodes_its_keeper_runs_on(workdir: Path) -> None:
    """Item 5: the keeper's nodes run on after kill -9 of the runner; `dagflow cancel` stops them and says so."""
    nightly = start(workdir)
    wait_for(lambda: running(workdir, "fetch.us") and running(workdir, "fetch.br"))
    kill_9(nightly)
    (run_id,) = runs(workdir)
    pids = starts(workdir, "fetch.us") + starts(workdir, "fetch.br")
    done = dagflow_cli("cancel", run_id, cwd=workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"stopped 2 nodes of run {run_id}" in done.stdout and "fetch.br, fetch.us" in done.stdout, done.stdout
    assert not any(alive(pid) for pid in pids), "a node of the cancelled run runs on"
    assert states(workdir, run_id) == {
        "fetch.us": "interrupted", "fetch.br": "interrupted", "train.us": "pending", "train.br": "pending",
    }  # fmt: skip
    again = dagflow_cli("cancel", run_id, cwd=workdir)
    assert again.returncode == 0 and "not running: nothing to stop" in again.stdout, again.stdout + again.stderr

    go(workdir, *NODES)  # the run resumes from there: the stopped nodes run again, once
    resumed = dagflow_cli("run", "--resume", run_id, cwd=workdir)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [len(starts(workdir, name)) for name in NODES] == [2, 2, 1, 1]


def test_a_run_with_other_params_never_takes_over_a_crashed_run(workdir: Path) -> None:
    """Item 6: the nightly run (alpha 0.1) is cut short while train.us runs; `--set alpha=0.5` is refused, and
    the alpha 0.1 training runs on to its end, in its own run."""
    go(workdir, "fetch.us", "fetch.br", "train.br")
    nightly = start(workdir)
    wait_for(lambda: running(workdir, "train.us"))
    kill_9(nightly)
    (run_id,) = runs(workdir)
    (trained,) = starts(workdir, "train.us")
    other = dagflow_cli("run", "pipeline.yaml", "--set", "alpha=0.5", cwd=workdir)
    text = refused(other, run_id, "train.us")
    assert "changed since" not in text and "continuing" not in text, text
    assert alive(trained) and runs(workdir) == [run_id], "the alpha 0.1 training was killed or taken over"

    go(workdir, "train.us")
    wait_for(lambda: not alive(trained))
    other = dagflow_cli("run", "pipeline.yaml", "--set", "alpha=0.5", cwd=workdir)  # a different run: it runs
    assert other.returncode == 0, other.stdout + other.stderr
    assert len(runs(workdir)) == 2
    assert [event[3] for event in events(workdir) if event[:2] == ["train.us", "start"]] == ["0.1", "0.5"]
    assert len(starts(workdir, "fetch.us")) == 1


def test_resubmit_and_resume_of_a_live_run_refuse_up_front(workdir: Path) -> None:
    """Item 8: a detached local run (`submit --engine local`) is live; resubmit and `run --resume` of it say
    so and exit 2 instead of starting a runner that fails in runner.log."""
    submitted = dagflow_cli("submit", "--engine", "local", "pipeline.yaml", "--json", cwd=workdir)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    run_id = json.loads(submitted.stdout)["run_id"]
    wait_for(lambda: running(workdir, "fetch.us"))
    for args in (["resubmit", run_id], ["run", "--resume", run_id], ["submit", "--resume", run_id]):
        done = dagflow_cli(*args, cwd=workdir)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "started" not in done.stdout and f"run {run_id} is running now (runner pid" in done.stderr
    log = workdir / ".dagflow" / "runs" / run_id / "runner.log"
    assert "being run by another runner" not in log.read_text()
    go(workdir, *NODES)
    wait_for(lambda: states(workdir, run_id) == dict.fromkeys(NODES, "succeeded"), timeout=120)
    assert [len(starts(workdir, name)) for name in NODES] == [1, 1, 1, 1]


SEARCHED = """\
name: tuned
params: {x: 0.0}
steps:
  prep: {command: [sh, node.sh, prep]}
  evaluate:
    kind: evaluate
    needs: [prep]
    command: [python3, evaluate.py, "{run.id}", "{params.x}"]
    metrics: out/{run.id}/metrics.json
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1, max: 1}
  budget: 1
  parallel: 1
  optimizer: random
"""
EVALUATE = """\
import json, pathlib, sys
out = pathlib.Path("out", sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
(out / "metrics.json").write_text(json.dumps({"loss": float(sys.argv[2]) ** 2}))
"""


def test_a_search_trial_beside_a_live_run_is_refused_as_a_cli_run_is(workdir: Path) -> None:
    """A search trial is a run like any other (#39 item 1): the run session asks the live-run rule for it too, so
    a trial that would run `prep` while `dagflow run` of the same pipeline runs it is refused, and the live run is
    left alone."""
    (workdir / "pipeline.yaml").write_text(SEARCHED)
    (workdir / "evaluate.py").write_text(EVALUATE)
    nightly = start(workdir)
    wait_for(lambda: running(workdir, "prep"), timeout=300)
    (run_id,) = runs(workdir)
    search = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "search", "run", "pipeline.yaml", "--poll", "0.05"],
        cwd=workdir, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:  # refused, or (before the session asked the rule for trials) its trial's prep started beside the live one
        wait_for(lambda: search.poll() is not None or len(starts(workdir, "prep")) > 1, timeout=300)
    finally:
        go(workdir, "prep")
    out, err = search.communicate(timeout=300)
    assert len(starts(workdir, "prep")) == 1, "the search trial ran prep beside the live run"
    refused(subprocess.CompletedProcess(search.args, search.returncode, out, err), run_id, "prep")
    assert nightly.wait(timeout=300) == 0
