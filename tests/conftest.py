import compileall
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests.cluster_lifetime import begin_session, stop_started

pytest_plugins = ["s3_server", "aws_fixtures", "slurm_fixtures", "condor_pool", "sge_fixtures"]

# A test that uses one of these (directly or through another fixture) needs a real cluster or pool.
CLUSTER_FIXTURES = frozenset({"slurm_cluster", "sge_cluster", "condor_pool"})
# A test that uses one of these starts a real server that takes seconds to come up: left out of the fast subset.
SLOW_SERVER_FIXTURES = frozenset({"seaweedfs"})


_STATE_HOME = tempfile.mkdtemp(prefix="dagflow-test-state-")

# With PYTHONDONTWRITEBYTECODE set (as on the machines CI runs on), every test process would rewrite the
# asserts of every test module and every `dagflow` command a test starts would compile the package again:
# about a third of the fast subset's time. The caches go to the ignored __pycache__ folders.
sys.dont_write_bytecode = False


def pytest_configure(config):  # type: ignore[no-untyped-def]
    begin_session()
    # Every run a test makes is noted in the user's index of runs (dagflow/run/index.py): keep the tests' own,
    # one per test process, out of the real one (the dagflow commands tests start inherit it).
    os.environ["XDG_STATE_HOME"] = _STATE_HOME
    if not hasattr(config, "workerinput"):  # once, before the xdist workers start
        compileall.compile_dir(Path(__file__).resolve().parent.parent / "dagflow", quiet=1)
    config.addinivalue_line(
        "markers", "condor_pool: needs the real HTCondor test pool (scripts/condor-pool.sh); deselect with "
        "-m 'not condor_pool' for the fast subset"
    )
    config.addinivalue_line(
        "markers", "cluster: needs a real Slurm or Grid Engine cluster or the HTCondor pool (set automatically "
        "for tests using their fixtures); the fast subset is -m 'not cluster and not slow'"
    )
    config.addinivalue_line(
        "markers", "condor_pool_exclusive: disrupts every job on the pool (drains its only machine); runs while no "
        "other pool test does (tests/cluster_lifetime.py cluster_use)"
    )
    config.addinivalue_line("markers", "slow: takes tens of seconds without any cluster; left out of the fast subset")


def pytest_unconfigure(config):  # type: ignore[no-untyped-def]
    shutil.rmtree(_STATE_HOME, ignore_errors=True)


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    for item in items:
        used = CLUSTER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if used:
            item.add_marker(pytest.mark.cluster)
        if "condor_pool" in used:
            item.add_marker(pytest.mark.condor_pool)
        if SLOW_SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def pytest_sessionfinish(session, exitstatus):  # type: ignore[no-untyped-def]
    if not hasattr(session.config, "workerinput"):  # the main process, after every xdist worker has finished
        stop_started()

