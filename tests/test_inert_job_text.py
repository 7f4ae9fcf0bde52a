"""Text a job wrote (its stderr, its metrics file's keys) reaches summaries inert: `dagflow status`,
`dagflow search run` and `dagflow search status` show a terminal escape sequence as `\\x1b...`, never
as the sequence itself, whether their output is a pipe or a terminal. (`dagflow logs` prints the log
as it is, by design.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from terminal_support import raw_terminal_output
from test_local_support import cli_env, dagflow_cli

# A window title, clear-screen and a CSI in its 8-bit form: each one does something to a real terminal.
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31mboom"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31mboom"

FAIL = f"""import sys
sys.stderr.write({HOSTILE!r} + "\\n")
sys.exit(1)
"""

PIPELINE = """name: hostile
steps:
  bad:
    command: [python, fail.py]
"""


def _failed_run(tmp_path: Path) -> None:
    (tmp_path / "fail.py").write_text(FAIL)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    done = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr


@pytest.mark.slow
def test_status_shows_a_failed_nodes_stderr_inert_in_a_pipe_and_a_terminal(tmp_path: Path) -> None:
    _failed_run(tmp_path)
    piped = dagflow_cli("status", cwd=tmp_path)
    assert "stderr of bad" in piped.stdout, piped.stdout
    assert "\x1b" not in piped.stdout and "\x9b" not in piped.stdout, repr(piped.stdout)
    assert SHOWN in piped.stdout, piped.stdout
    shown = raw_terminal_output(["status"], tmp_path, columns=200)
    assert "stderr of bad" in shown, shown
    for sequence in ("\x1b]0;pwned", "\x1b[2J", "\x9b"):
        assert sequence not in shown, repr(shown)
    assert "pwned" in shown and "boom" in shown
    logs = dagflow_cli("logs", "--err", "latest", "bad", cwd=tmp_path)  # logs stay raw, as written
    assert HOSTILE in logs.stdout, repr(logs.stdout)


OBJECTIVE = """import json, sys
from pathlib import Path
out = Path(sys.argv[1])
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text(json.dumps({"\\x1b[2J\\x1b]0;pwned\\x07": 1.0}))
"""

SEARCH = """name: keys
params: {x: 0.0}
steps:
  evaluate:
    kind: evaluate
    command: python objective.py out/{run.id}/metrics.json
    metrics: out/{run.id}/metrics.json
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1, max: 1}
  budget: 1
  parallel: 1
  optimizer: random
"""


@pytest.mark.slow
def test_search_run_and_status_show_a_trials_error_inert(tmp_path: Path) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    (tmp_path / "pipeline.yaml").write_text(SEARCH)
    ran = subprocess.run(
        [sys.executable, "-m", "dagflow", "search", "run", "pipeline.yaml"],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert "has no 'loss'" in ran.stdout, ran.stdout + ran.stderr
    assert "\x1b" not in ran.stdout + ran.stderr, repr(ran.stdout + ran.stderr)
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in ran.stdout
    status = dagflow_cli("search", "status", "keys", "--no-plot", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "t1 failed: " in status.stdout and "\x1b" not in status.stdout, repr(status.stdout)
    assert "\\x1b[2J\\x1b]0;pwned\\x07" in status.stdout
