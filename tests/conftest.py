pytest_plugins = ["aws_fixtures"]
