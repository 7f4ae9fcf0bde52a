"""Helpers for the search scheduler and CLI tests: a tiny pipeline whose objective is a real process.

objective.py computes a quadratic in the searched params and records every invocation (one line, the
trial's run id, appended with a single write) in calls.txt. Files in the pipeline's directory make
one trial misbehave, each consumed by the first trial that renames it: fail-once (exit 1),
vanish-once (SIGKILL its runner, so the run is left unfinished), hang-once (sleep past any deadline).
sleep.txt, when present, holds seconds every trial sleeps first.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from test_local_support import cli_env

OBJECTIVE = r'''
import argparse, json, os, signal, sys, time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--x", type=float, required=True)
parser.add_argument("--k", type=int, required=True)
parser.add_argument("--mode", required=True)
parser.add_argument("--region", default="")
parser.add_argument("--run", required=True)
parser.add_argument("--out", type=Path, required=True)
args = parser.parse_args()


def once(name):
    try:
        os.rename(name, f"{name}.{os.getpid()}")
        return True
    except FileNotFoundError:
        return False


fd = os.open("calls.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, f"{args.run}\n".encode())
os.close(fd)
if os.path.exists("sleep.txt"):
    time.sleep(float(Path("sleep.txt").read_text()))
if once("fail-once"):
    print("failing on purpose", file=sys.stderr)
    sys.exit(1)
if once("vanish-once"):
    os.kill(os.getppid(), signal.SIGKILL)
    sys.exit(1)
if once("hang-once"):
    time.sleep(120)
offset = {"": 0.0, "a": 0.0, "b": 10.0}[args.region]
loss = (args.x - 0.3) ** 2 + 0.1 * args.k + (0.5 if args.mode == "b" else 0.0) + offset
args.out.parent.mkdir(parents=True, exist_ok=True)
args.out.write_text(json.dumps({"loss": loss, "omp": os.environ.get("OMP_NUM_THREADS")}))
'''

SETUP = r'''
import os
fd = os.open("setup-calls.txt", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
os.write(fd, b"setup\n")
os.close(fd)
with open(f"base.{os.getpid()}", "w") as handle:
    handle.write("base\n")
os.replace(f"base.{os.getpid()}", "base.txt")
'''


def write_pipeline(
    directory: Path,
    *,
    name: str = "quad",
    budget: int = 5,
    parallel: int = 2,
    regions: list[str] | None = None,
    optimizer: str = "gp",
    metrics: str | None = None,
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "objective.py").write_text(OBJECTIVE)
    (directory / "setup_step.py").write_text(SETUP)
    region_arg = " --region {region}" if regions else ""
    metrics = metrics or ("out/{run.id}/{region}/metrics.json" if regions else "out/{run.id}/metrics.json")
    matrix = f"matrix:\n  region: [{', '.join(regions)}]\n" if regions else ""
    per = "  per: region\n" if regions else ""
    text = f"""name: {name}
{matrix}params: {{x: 0.0, k: 1, mode: a}}
steps:
  setup:
    command: python setup_step.py
    over: [{"region" if regions else ""}]
    outputs:
      - base.txt
  evaluate:
    kind: evaluate
    needs: [setup]
    command: >-
      python objective.py --x {{params.x}} --k {{params.k}} --mode {{params.mode}}
      --run {{run.id}} --out {metrics}{region_arg}
    metrics: {metrics}
search:
  objective: {{metric: loss, goal: minimize}}
  variables:
    x: {{type: FLOAT, min: -1, max: 1}}
    k: {{type: INT, min: 1, max: 3}}
    mode: {{type: ENUM, options: [a, b]}}
  budget: {budget}
  parallel: {parallel}
  engine: {optimizer}
{per}"""
    if not regions:
        text = text.replace("    over: []\n", "")
    path = directory / "pipeline.yaml"
    path.write_text(text)
    return path


def search_cli(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "search", *args],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_search(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagflow", "search", *args],
        cwd=cwd,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill_9_search_when(condition: Callable[[], bool], *args: str, cwd: Path) -> None:
    """Start `dagflow search ARGS`, SIGKILL it once condition holds, and reap it."""
    scheduler = start_search(*args, cwd=cwd)
    wait_for(condition)
    os.kill(scheduler.pid, signal.SIGKILL)
    scheduler.wait()


def trial_rows(db: Path) -> list[dict[str, object]]:
    """Every trial row, read with a connection of its own (as another process would)."""
    if not db.exists():
        return []
    with sqlite3.connect(db, timeout=30) as connection:
        connection.row_factory = sqlite3.Row
        try:
            rows = connection.execute("SELECT * FROM trials ORDER BY region, number").fetchall()
        except sqlite3.OperationalError:  # the scheduler has not created the schema yet
            return []
    return [{**dict(row), "params": json.loads(row["params"])} for row in rows]


def finished_search_rows(db: Path, directory: Path, trials: int) -> list[dict[str, object]]:
    """The trial rows of a search that ran its whole budget, checked: each of its `trials` trials
    succeeded, and each trial's objective ran exactly once (none lost, none run twice)."""
    rows = trial_rows(db)
    assert [row["state"] for row in rows] == ["succeeded"] * trials, rows
    assert sorted(calls(directory)) == sorted(str(row["run_id"]) for row in rows)
    return rows


def calls(directory: Path) -> list[str]:
    path = directory / "calls.txt"
    return path.read_text().split() if path.exists() else []


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)
