"""A damaged condor/run.json (#40 item 17): `dagflow status` says which file and why, in one line, instead of a
JSONDecodeError or TypeError traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from condor_runs import prepare_condor
from test_local_support import cli_env

from dagflow.engines.condor.records import CondorRecord
from tests.condor_helpers import regional_plan

DAMAGED = {
    "torn": '{"dag": "x.dag", "submissions": [{"cluster": 7,',
    "a list": "[]",
    "a number for the dag": '{"dag": 3}',
    "an unknown field": '{"dag": "x.dag", "colour": "red"}',
    "a submission not an object": '{"dag": "x.dag", "submissions": ["7"]}',
    "a cluster not a number": '{"dag": "x.dag", "submissions": [{"cluster": "7", "t": 1.0}]}',
    "not UTF-8": b'{"dag": "\xff"}',
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_status_of_a_run_with_a_damaged_record_is_one_line(tmp_path: Path, damage: str) -> None:
    prepared = prepare_condor(regional_plan(), tmp_path)
    record = CondorRecord.path(prepared.layout.run_dir)
    text = DAMAGED[damage]
    record.write_bytes(text if isinstance(text, bytes) else text.encode())
    for args in (["status", prepared.layout.run_id], ["status", prepared.layout.run_id, "--json"]):
        done = subprocess.run([sys.executable, "-m", "dagflow", *args, "--runs-dir", str(tmp_path)], env=cli_env(),
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"{record}: " in lines[0] and "damaged" in lines[0], lines
