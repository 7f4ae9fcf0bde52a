"""`dagflow submit` with no HTCondor configuration says what to set (the htcondor2 bindings read
CONDOR_CONFIG as /dev/null when it is unset and no condor_config is found)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PIPELINE = "name: tiny\nsteps:\n  hello:\n    command: echo hi\n"


def test_unset_condor_config_names_what_to_set(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("CONDOR_", "_CONDOR_"))}
    env |= {"HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "submit", "pipeline.yaml", "--data-mode", "shared", "--runs-dir", "runs"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 3, done.stderr
    assert "no HTCondor configuration" in done.stderr and "set CONDOR_CONFIG" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
