"""`dagflow runs gc`: old runs and the cache entries only they account for go; a live run beside them (a real
local run whose node waits on a FIFO the test holds) is untouched, and keeps caching while the index is
rewritten under it; a gc killed with SIGKILL midway is finished by the next one. Real processes, real files;
each test has its own XDG_STATE_HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from test_local_support import cli_env

# `block` waits for the test while the FIFOs are there: it opens `started` (the test's open of it returns:
# the node runs now), then reads `gate` until the test closes its end.
PIPELINE = """\
name: gcdemo
params: {n: 0}
steps:
  first:
    command: [python, -c, "open('first-{params.n}.txt', 'w').write('x')"]
  block:
    needs: [first]
    command: [python, hold.py, "{params.n}"]
"""
HOLD = """\
import os, sys
if os.path.exists("started"):
    open("started", "w").close()
    open("gate").read()
open(f"block-{sys.argv[1]}.txt", "w").write("x")
"""
WAIT_S = 300  # only a safety net: each wait is for an event


def _dagflow(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=WAIT_S, check=False)


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    (project / "hold.py").write_text(HOLD, encoding="utf-8")
    return project, {**cli_env(), "XDG_STATE_HOME": str(tmp_path / "state")}


def _index_keys(project: Path) -> list[str]:
    lines = (project / ".dagflow" / "cache" / "index.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted(json.loads(line)["k"] for line in lines)


def _journal_keys(project: Path, run_id: str) -> list[str]:
    keys = []
    for line in (project / ".dagflow" / "runs" / run_id / "journal.jsonl").read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        if event.get("k"):
            keys.append(event["k"])
    return sorted(set(keys))


def _counts(done: subprocess.CompletedProcess[str]) -> dict[str, int]:
    """Node counts by state from `dagflow run --json` (its last line is the run's result)."""
    return json.loads(done.stdout.splitlines()[-1])["counts"]


def _opened(path: Path, mode: str) -> None:
    """Open the FIFO (blocking until the node opens its end) and close it; fails the test if that never comes."""
    done = threading.Event()
    thread = threading.Thread(target=lambda: (open(path, mode).close(), done.set()), daemon=True)
    thread.start()
    assert done.wait(WAIT_S), f"nothing opened {path}"


def _ended(project: Path, env: dict[str, str], run_id: str) -> dict:
    deadline = time.monotonic() + WAIT_S
    while True:
        status = json.loads(_dagflow("status", run_id, "--json", cwd=project, env=env).stdout)
        if status["state"] not in ("running", "pending", "not-started"):
            return status
        assert time.monotonic() < deadline, f"run {run_id} never ended: {status['state']}"
        time.sleep(0.2)


def test_gc_removes_old_runs_and_spares_a_live_one(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for n in (1, 2):
        done = _dagflow("run", "pipeline.yaml", "--set", f"n={n}", "--run-id", f"old{n}", cwd=project, env=env)
        assert done.returncode == 0, done.stderr
    old_keys = _journal_keys(project, "old1") + _journal_keys(project, "old2")
    assert len(old_keys) == 4 and _index_keys(project) == sorted(old_keys)
    os.mkfifo(project / "started")
    os.mkfifo(project / "gate")
    submitted = _dagflow("submit", "pipeline.yaml", "--engine", "local", "--set", "n=3", "--run-id", "live",
                         cwd=project, env=env)
    assert submitted.returncode == 0, submitted.stderr
    _opened(project / "started", "r")  # `first` succeeded and is in the cache; `block` runs now
    try:
        rows = {row["run_id"]: row for row in json.loads(_dagflow("runs", "--json", cwd=elsewhere, env=env).stdout)}
        assert {run_id: row["state"] for run_id, row in rows.items()} == {
            "old1": "succeeded", "old2": "succeeded", "live": "running"}

        looked = _dagflow("runs", "gc", "--keep", "0", "--dry-run", cwd=elsewhere, env=env)
        assert looked.returncode == 0, looked.stderr
        assert "would remove old1" in looked.stdout and "would remove old2" in looked.stdout
        assert "live" not in looked.stdout.replace("would remove 2", "")
        assert (project / ".dagflow" / "runs" / "old1").is_dir()

        gc = _dagflow("runs", "gc", "--keep", "0", cwd=elsewhere, env=env)
        assert gc.returncode == 0, gc.stderr
        assert "removed old1" in gc.stderr and "removed old2" in gc.stderr, gc.stderr
        assert "gc: removed 2 of 2 old run(s)" in gc.stdout and "4 cache entries" in gc.stdout, gc.stdout
        assert "live (live)" in gc.stdout, gc.stdout
        runs = project / ".dagflow" / "runs"
        assert not (runs / "old1").exists() and not (runs / "old2").exists()
        assert (runs / "live" / "plan.json").is_file()
        assert _index_keys(project) == _journal_keys(project, "live")  # `first` of the live run
    finally:
        _opened(project / "gate", "w")
    assert _ended(project, env, "live")["state"] == "succeeded"
    # The runner appended `block`'s entry to the index gc rewrote: a new run of n=3 is all cached.
    assert len(_index_keys(project)) == 2
    for fifo in ("started", "gate"):
        (project / fifo).unlink()
    again = _dagflow("run", "pipeline.yaml", "--set", "n=3", "--json", cwd=project, env=env)
    assert again.returncode == 0, again.stderr
    assert _counts(again) == {"cached": 2}, again.stdout


KILLED_GC = """
import os, signal, sys
import dagflow.engines.jobs.cache as cache
def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9 between moving the runs aside and dropping their entries
cache.drop_entries = killed
sys.argv = ["dagflow", "runs", "gc", "--keep", "1"]
from dagflow.cli.commands import run
run()
"""


def test_a_gc_killed_midway_is_finished_by_the_next(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    for run_id, n in (("r1", 1), ("r2", 2), ("r3", 1)):  # r3 is r1 again: all cached, from r1's entries
        done = _dagflow("run", "pipeline.yaml", "--set", f"n={n}", "--run-id", run_id, cwd=project, env=env)
        assert done.returncode == 0, done.stderr
    r1_keys = _journal_keys(project, "r1")
    assert _journal_keys(project, "r3") == r1_keys
    r2_keys = _journal_keys(project, "r2")

    killed = subprocess.run([sys.executable, "-c", KILLED_GC], cwd=project, env=env, capture_output=True, text=True,
                            timeout=WAIT_S, check=False)
    assert killed.returncode == -9, killed.stderr
    runs = project / ".dagflow" / "runs"
    assert sorted(path.name for path in runs.iterdir() if path.is_dir()) == [".gc-r1", ".gc-r2", "r3"]
    listed = json.loads(_dagflow("runs", "--json", cwd=project, env=env).stdout)
    assert [row["run_id"] for row in listed] == ["r3"]  # a run being removed is no run
    assert set(r2_keys) <= set(_index_keys(project))

    gc = _dagflow("runs", "gc", "--keep", "1", cwd=project, env=env)
    assert gc.returncode == 0, gc.stderr
    assert "removed r1" in gc.stderr and "removed r2" in gc.stderr, gc.stderr
    assert sorted(path.name for path in runs.iterdir() if path.is_dir()) == ["r3"]
    assert _index_keys(project) == r1_keys  # r3 still accounts for r1's entries
    cached = _dagflow("run", "pipeline.yaml", "--set", "n=1", "--json", cwd=project, env=env)
    assert _counts(cached) == {"cached": 2}, cached.stdout
    rerun = _dagflow("run", "pipeline.yaml", "--set", "n=2", "--json", cwd=project, env=env)
    assert _counts(rerun) == {"succeeded": 2}, rerun.stdout


def test_gc_needs_a_rule_and_reads_durations(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    none = _dagflow("runs", "gc", cwd=project, env=env)
    assert none.returncode == 2 and "--keep N" in none.stderr, none.stderr
    bad = _dagflow("runs", "gc", "--older-than", "soon", cwd=project, env=env)
    assert bad.returncode == 2 and "--older-than" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    assert _dagflow("run", "pipeline.yaml", "--run-id", "young", cwd=project, env=env).returncode == 0
    kept = _dagflow("runs", "gc", "--older-than", "7d", cwd=project, env=env)
    assert kept.returncode == 0 and "removed 0 of 0" in kept.stdout, kept.stdout + kept.stderr
    old = project / ".dagflow" / "runs" / "young"
    week_ago = time.time() - 8 * 86400
    for name in ("journal.jsonl", "plan.json"):
        os.utime(old / name, (week_ago, week_ago))
    removed = _dagflow("runs", "gc", "--older-than", "7d", "--json", cwd=project, env=env)
    assert json.loads(removed.stdout)["removed"] == 1 and not old.exists(), removed.stdout + removed.stderr


def test_cancel_of_a_live_run_by_a_prefix_of_its_id_from_elsewhere(tmp_path: Path) -> None:
    project, env = _project(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.mkfifo(project / "started")
    os.mkfifo(project / "gate")
    submitted = _dagflow("submit", "pipeline.yaml", "--engine", "local", "--run-id", "tocancel-1", cwd=project, env=env)
    assert submitted.returncode == 0, submitted.stderr
    _opened(project / "started", "r")
    cancelled = _dagflow("cancel", "tocancel", "--json", cwd=elsewhere, env=env)
    assert cancelled.returncode in (0, 1, 130), cancelled.stderr
    status = _ended(elsewhere, env, "tocancel-1")
    assert status["state"] in ("interrupted", "cancelled"), status["state"]


def test_gc_keeps_the_run_behind_a_promoted_model(tmp_path: Path) -> None:
    """A promotion pointer names the run whose model it points at: that run stays; an earlier run whose
    promotion the pointer has moved past goes."""
    project, env = _project(tmp_path)
    for run_id, n in (("first", 1), ("second", 2), ("third", 3)):
        done = _dagflow("run", "pipeline.yaml", "--set", f"n={n}", "--run-id", run_id, cwd=project, env=env)
        assert done.returncode == 0, done.stderr
    runs = project / ".dagflow" / "runs"
    for run_id in ("first", "second"):
        verdict = {"node": "train.promote", "verdict": "promoted", "reason": "better", "metric": "loss",
                   "better": "lower", "pointer": "models/latest.json", "run_id": run_id}
        (runs / run_id / "promotions").mkdir()
        (runs / run_id / "promotions" / "train.promote.json").write_text(json.dumps(verdict), encoding="utf-8")
    (project / "models").mkdir()
    (project / "models" / "latest.json").write_text(json.dumps({"run_id": "first", "model": "m"}), encoding="utf-8")
    gc = _dagflow("runs", "gc", "--keep", "0", cwd=project, env=env)
    assert gc.returncode == 0, gc.stderr
    assert sorted(path.name for path in runs.iterdir() if path.is_dir()) == ["first"]
    assert "first (behind the promoted model of" in gc.stdout, gc.stdout
