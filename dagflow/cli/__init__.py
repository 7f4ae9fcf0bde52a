"""The `dagflow` command line. Each command module registers its commands on the shared app."""

from __future__ import annotations

import importlib

from dagflow.cli.app import app

COMMAND_MODULES = (
    "spec_cmds",
    "condor_cmds",
    "run_cmds",
    "submit_cmds",
    "transfer_cmds",
    "schedule_cmds",
    "agent_cmds",
    "autoscale_cmds",
    "search_cmds",
)

for _module in COMMAND_MODULES:
    importlib.import_module(f"dagflow.cli.{_module}")


def main() -> None:
    app()
