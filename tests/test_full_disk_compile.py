"""`dagflow compile` and `dagflow submit --dry-run` on a full disk (#40 item 17): one line naming what could not
be written, exit 2, instead of an OSError traceback. A real small filesystem (tmpfs), filled up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_condor_submit import PIPELINE, unreachable  # noqa: F401  # the fixture
from test_local_faults import small_disk  # noqa: F401  # the fixture

from tests.condor_helpers import write


@pytest.mark.slow
def test_compile_and_a_dry_run_on_a_full_disk_say_so_in_one_line(
    tmp_path: Path, small_disk: Path, unreachable: dict[str, str]  # noqa: F811
) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", PIPELINE)
    subprocess.run(f"cat /dev/zero > {small_disk}/filler", shell=True, check=False, stderr=subprocess.DEVNULL)
    commands = {
        "compile": ["compile", str(pipeline), "-o", str(small_disk / "dag")],
        "dry run": ["submit", "--engine", "condor", str(pipeline), "--dry-run", "--runs-dir", str(small_disk / "runs")],
    }
    for what, args in commands.items():
        done = subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=tmp_path, env=unreachable,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr, (what, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and "No space left on device" in lines[0], (what, lines)
        assert f"cannot write under {small_disk}/" in lines[0] or f"cannot write {small_disk}/" in lines[0], lines
