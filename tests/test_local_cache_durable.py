"""A kill -9 of the runner at the moment a success is written to one of its two records (the cache index
and the run's journal) and not yet to the other: the next plain `dagflow run` does not run that node again.
The crash point is made exact by DAGFLOW_TEST_KILL_BETWEEN_WRITES (outcomes.py), which makes the runner
SIGKILL itself between the two writes. The node is the run's last: nothing else the keeper records
makes the next run continue the killed one."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from test_local_support import cli_env, dagflow_cli

PIPELINE = """\
name: durable
steps:
  make:
    command: [sh, -c, 'echo make >> ran.log; echo made > made.txt']
    outputs: [made.txt]
"""


def test_a_kill_9_between_the_cache_entry_and_the_journal_event_does_not_rerun_the_node(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    env = {**cli_env(), "DAGFLOW_TEST_KILL_BETWEEN_WRITES": "1"}
    killed = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "pipeline.yaml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["make"]

    again = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["make"], "the finished node ran again"
    status = json.loads(dagflow_cli("status", "--json", cwd=tmp_path).stdout)
    assert {node["node"]: node["state"] for node in status["nodes"]}["make"] in ("succeeded", "cached")

    third = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)
    assert third.returncode == 0, third.stdout + third.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["make"]
    assert (tmp_path / "made.txt").read_text() == "made\n"
