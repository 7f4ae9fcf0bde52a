pytest_plugins = ["aws_fixtures", "slurm_fixtures"]
