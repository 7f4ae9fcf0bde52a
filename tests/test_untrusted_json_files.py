"""JSON a job wrote (a metrics file, an early-stopping progress line, a model pointer) nested deeper than
anything real: the trial or node fails with the reason, and the search, `report` and `promote` go on.
Python's json recurses once per level, so such a file used to raise RecursionError wherever it was read,
and a search that crashed on one crashed again on every restart."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.bounded import MAX_DEPTH

DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"

# The first trial (the one that renames deep-once) writes a metrics file nested 100,000 deep.
OBJECTIVE = f"""import json, os, sys
from pathlib import Path
out = Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
try:
    os.rename("deep-once", f"deep-once.{{os.getpid()}}")
    out.write_text('{{"loss": {DEEP}}}')
except FileNotFoundError:
    out.write_text(json.dumps({{"loss": (float(sys.argv[1]) - 0.3) ** 2}}))
"""

SEARCH = """name: deep
params: {x: 0.0}
steps:
  evaluate:
    kind: evaluate
    command: python objective.py {params.x} out/{run.id}/metrics.json
    metrics: out/{run.id}/metrics.json
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1, max: 1}
  budget: 2
  parallel: 1
  optimizer: random
"""

# Early stopping reads the progress lines; the first one is nested 100,000 deep.
TRAIN = f"""import json, sys
from pathlib import Path
out = Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
with out.open("w") as handle:
    handle.write('{{"step": 1, "loss": {DEEP}}}\\n')
    handle.write(json.dumps({{"step": 2, "loss": 0.5}}) + "\\n")
    handle.write(json.dumps({{"loss": (float(sys.argv[1]) - 0.3) ** 2}}) + "\\n")
"""

CURVES = """name: curves
params: {x: 0.0}
steps:
  train:
    kind: train
    command: python train.py {params.x} out/{run.id}/metrics.jsonl
    metrics: out/{run.id}/metrics.jsonl
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1, max: 1}
  budget: 3
  parallel: 1
  optimizer: random
  early_stopping: {rule: median, min_steps: 1, min_trials: 1}
"""


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # the timeout only keeps a regression from hanging the suite; nothing here measures time
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )


def trials(db: Path) -> list[dict[str, object]]:
    with sqlite3.connect(db) as connection:
        connection.row_factory = sqlite3.Row
        return [dict(row) for row in connection.execute("SELECT * FROM trials ORDER BY number")]


@pytest.mark.slow
def test_a_deep_metrics_file_fails_its_trial_and_the_search_goes_on(tmp_path: Path) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    (tmp_path / "pipeline.yaml").write_text(SEARCH)
    (tmp_path / "deep-once").write_text("")
    ran = cli("search", "run", "pipeline.yaml", cwd=tmp_path)
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    first, second = trials(tmp_path / ".dagflow" / "search.db")
    assert first["state"] == "failed" and TOO_DEEP in str(first["error"]), first
    assert "metrics file" in str(first["error"]) and second["state"] == "succeeded"
    again = cli("search", "run", "pipeline.yaml", cwd=tmp_path)  # a restart reads the same files
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-3000:]
    for args in (("search", "status", "deep", "--no-plot"), ("report", "--search", "deep"), ("report", "deep-t1")):
        done = cli(*args, cwd=tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr[-3000:])


@pytest.mark.slow
def test_a_deep_progress_line_is_skipped_by_early_stopping(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    (tmp_path / "pipeline.yaml").write_text(CURVES)
    ran = cli("search", "run", "pipeline.yaml", cwd=tmp_path)
    assert "Traceback" not in ran.stderr, ran.stderr[-3000:]
    assert ran.returncode == 0, ran.stdout + ran.stderr[-3000:]
    states = [row["state"] for row in trials(tmp_path / ".dagflow" / "search.db")]
    assert len(states) == 3 and "failed" not in states, states


def _promote(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return cli("promote", "--metrics", "metrics.json", "--metric", "val_loss", "--better", "lower", "--than",
               "latest", "--model", "model/", "--run-id", "r1", "--node", "eval.promote", cwd=tmp_path)  # fmt: skip


@pytest.mark.slow
def test_promote_refuses_a_deep_metrics_file_or_pointer(tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model/m.txt").write_text("m")
    (tmp_path / "metrics.json").write_text('{"val_loss": ' + DEEP + "}")
    deep_metrics = _promote(tmp_path)
    assert deep_metrics.returncode == 2 and "Traceback" not in deep_metrics.stderr, deep_metrics.stderr[-3000:]
    assert f"metrics file metrics.json is not readable JSON: {TOO_DEEP}" in deep_metrics.stderr
    (tmp_path / "metrics.json").write_text(json.dumps({"val_loss": 0.5}))
    (tmp_path / "latest").write_text('{"model": "old/", "metrics": ' + DEEP + "}")
    deep_pointer = _promote(tmp_path)
    assert deep_pointer.returncode == 2 and "Traceback" not in deep_pointer.stderr, deep_pointer.stderr[-3000:]
    assert "the current pointer latest is not a dagflow pointer" in deep_pointer.stderr
