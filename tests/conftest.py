pytest_plugins = ["aws_fixtures", "slurm_fixtures", "condor_pool", "sge_fixtures"]


def pytest_configure(config):  # type: ignore[no-untyped-def]
    config.addinivalue_line(
        "markers", "condor_pool: needs the real HTCondor test pool (scripts/condor-pool.sh); deselect with "
        "-m 'not condor_pool' for the fast subset"
    )
