"""The Montage example (#42 item 3) on the real one-machine HTCondor pool (tests/condor_pool.py), in transfer
mode: each job sees only the files its step declares, so the pairwise needs and the {inputs} of every
node must be right for the mosaic to come out as a local run's."""

from __future__ import annotations

import json

import pytest
from condor_pool import Pool
from test_condor_transfer_pool import run_here_and_in_transfer_mode
from test_example_montage import BANDS, EXAMPLE, check_mosaic

pytestmark = pytest.mark.condor_pool

RUN_TIMEOUT = 3600  # 115 jobs on a loaded 2-core pool: only stops a hang


def test_the_montage_example_runs_on_the_pool_with_the_mosaic_of_a_local_run(condor_pool: Pool) -> None:
    local, pooled = run_here_and_in_transfer_mode(condor_pool, EXAMPLE, "work", "mosaic.*", timeout=RUN_TIMEOUT)
    check_mosaic(pooled)
    for band in BANDS:
        for name in ("corrections.json", "mosaic.json"):
            assert (pooled / "work" / band / name).read_text() == (local / "work" / band / name).read_text()
    assert (pooled / "mosaic.ppm").read_text() == (local / "mosaic.ppm").read_text()
    run_dir = next((pooled / ".dagflow" / "runs").glob("montage-*"))
    dag = (run_dir / "condor" / "montage.dag").read_text()
    assert "PARENT project.j.r0c0 project.j.r0c1 CHILD diff.j.r0c0.r0c1" in dag
    assert json.loads((run_dir / "condor" / "run.json").read_text())["data_mode"] == "transfer"
