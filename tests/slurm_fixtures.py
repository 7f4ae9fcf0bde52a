"""A real one-node Slurm cluster on localhost for the Slurm engine tests (scripts/slurm-cluster.sh).

CI (`.ci/run`) starts the cluster before the tests and stops it after; `up` is idempotent, so the
fixture's `up` then finds it running and the fixture leaves it alone. Run without CI (the README's test
command on a fresh machine), the fixture starts the cluster itself and it is stopped at the end of the
session (tests/cluster_lifetime.py: with several pytest workers, once all have finished).
Without Slurm installed, or not as root, the cluster tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_lifetime import bring_up

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slurm-cluster.sh"


def _state_dir() -> Path:
    return Path(os.environ.get("DAGFLOW_SLURM_DIR", "/tmp/dagflow-slurm"))


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Path]:
    """SLURM_CONF of a running cluster, set in os.environ for the session."""
    missing = [name for name in ("munged", "slurmctld", "slurmd", "sbatch") if shutil.which(name) is None]
    if missing:
        pytest.skip(f"Slurm is not installed (no {', '.join(missing)}): apt-get install -y slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("the test Slurm cluster needs root (slurmd runs jobs as their users)")
    done = bring_up(
        "slurm", SCRIPT,
        is_up=lambda: subprocess.run([str(SCRIPT), "status"], capture_output=True, check=False).returncode == 0,
        up=lambda: subprocess.run([str(SCRIPT), "up"], capture_output=True, text=True, check=False),
    )  # fmt: skip
    if done is not None and done.returncode != 0:
        pytest.fail(f"could not start the test Slurm cluster:\n{done.stdout}{done.stderr}")
    conf = _state_dir() / "slurm.conf"
    previous = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(conf)
    try:
        yield conf
    finally:
        if previous is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = previous
