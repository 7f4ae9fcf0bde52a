"""A search on a disk that fills up (#40 item 13), on a real small filesystem: the scheduler stops with one
line (it used to die on a sqlite3.OperationalError traceback), and once space is freed the same command
resumes the trials the full disk cut short instead of counting them as failed (6 trials gave 4 results)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_local_faults import small_disk  # noqa: F401  # the fixture
from test_local_support import cli_env

PIPELINE = """name: full
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
  budget: 3
  parallel: 2
  optimizer: random
"""

# Writes its result, says it started (outside the small disk), and ends once the test says go.
OBJECTIVE = """import json, os, sys, time
from pathlib import Path
out = Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({{"loss": (float(sys.argv[1]) - 0.3) ** 2}}))
Path("{control}", "started." + os.environ["DAGFLOW_RUN_ID"]).touch()
while not os.path.exists("{control}/go"):
    time.sleep(0.05)
"""


def search(project: Path) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "dagflow", "search", "run", "pipeline.yaml", "--poll", "0.2"]
    return subprocess.Popen(argv, cwd=project, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for(what: str, done: object) -> None:
    deadline = time.monotonic() + 300  # a safety net only: each wait is for an event
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_full_disk_stops_the_search_in_one_line_and_its_trials_resume(tmp_path: Path, small_disk: Path) -> None:  # noqa: F811
    subprocess.run(["mount", "-o", "remount,size=4m", str(small_disk)], check=True)
    project, control = small_disk / "p", tmp_path / "control"
    project.mkdir()
    control.mkdir()
    (project / "pipeline.yaml").write_text(PIPELINE)
    (project / "objective.py").write_text(OBJECTIVE.format(control=control))
    scheduler = search(project)
    try:
        wait_for("both trials to start", lambda: len(list(control.glob("started.*"))) == 2)
        subprocess.run(f"cat /dev/zero > {small_disk}/filler", shell=True, check=False, stderr=subprocess.DEVNULL)
        (control / "go").touch()
        out, err = scheduler.communicate(timeout=300)
    finally:
        if scheduler.poll() is None:
            scheduler.kill()
    assert scheduler.returncode == 2 and "Traceback" not in err, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "free some space, then run the same command again" in lines[0], err

    (small_disk / "filler").unlink()
    again = search(project)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "Traceback" not in err, out + err
    assert out.count("] resumed run full-t") == 2, out
    with sqlite3.connect(project / ".dagflow" / "search.db") as connection:
        states = [state for (state,) in connection.execute("SELECT state FROM trials ORDER BY number")]
    assert states == ["succeeded"] * 3, out + err
