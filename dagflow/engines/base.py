"""The one contract every engine implements (local, condor, slurm, ...).

An engine turns a Plan into work somewhere. It owns nothing but what it writes into the run
directory; status, resume and reports read that directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from dagflow.plan import Plan


@runtime_checkable
class Engine(Protocol):
    name: str

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        """Write whatever the engine needs into run_dir (generated files, journal); start nothing."""

    def submit(self, plan: Plan, run_dir: Path) -> str:
        """Start the work; return an engine-specific handle (a job id, a pid) recorded in run_dir."""

    def status(self, run_dir: Path) -> dict[str, str]:
        """Node name -> state, read from what the engine wrote into run_dir."""

    def cancel(self, run_dir: Path) -> None:
        """Stop the work started by submit."""
