"""A real one-node Grid Engine cluster on localhost for the Grid Engine tests (scripts/sge-cluster.sh).

CI starts the cluster before the tests and stops it after; `up` is idempotent, so the fixture's `status`
then finds it running and the fixture leaves it alone. Run without CI, the fixture starts the cluster itself
(installing Debian's gridengine packages with apt-get when missing) and stops it at the end of the session.
Not as root, or with neither the packages nor apt-get, the cluster tests are skipped with the reason.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cluster_lifetime import bring_up

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts", "sge-cluster.sh")


def _cluster_env() -> dict[str, str]:
    """The variables `sge-cluster.sh env` exports (SGE_ROOT, SGE_CELL, the ports)."""
    out = subprocess.run([SCRIPT, "env"], capture_output=True, text=True, check=True).stdout
    words = shlex.split(out)
    if not words or words[0] != "export":
        raise RuntimeError(f"unexpected output of {SCRIPT} env: {out!r}")
    return dict(word.split("=", 1) for word in words[1:])


@pytest.fixture(scope="session")
def sge_cluster() -> Iterator[dict[str, str]]:
    """The client environment of a running cluster, also set in os.environ for the session."""
    if os.geteuid() != 0:
        pytest.skip("the test Grid Engine cluster needs root (installs packages; sge_execd runs jobs as their users)")
    if not os.path.exists("/usr/sbin/sge_qmaster") and shutil.which("apt-get") is None:
        pytest.skip("Grid Engine is not installed and there is no apt-get to install gridengine-master/-exec/-client")
    done = bring_up(
        "sge", Path(SCRIPT),
        is_up=lambda: subprocess.run([SCRIPT, "status"], capture_output=True, check=False).returncode == 0,
        up=lambda: subprocess.run([SCRIPT, "up"], capture_output=True, text=True, check=False),
    )  # fmt: skip
    if done is not None and done.returncode != 0:
        if "apt-get install failed" in done.stderr:
            pytest.skip(f"could not install Grid Engine:\n{done.stderr}")
        pytest.fail(f"could not start the test Grid Engine cluster:\n{done.stdout}{done.stderr}")
    env = _cluster_env()
    previous = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
