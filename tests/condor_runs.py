"""A condor run directory made through the run session (dagflow/run/session.py), compiled and recorded but
never submitted: what `dagflow submit --engine condor` makes before it reaches the schedd."""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.condor.engine import CondorEngine, Prepared, load_prepared
from dagflow.engines.registry import run_session
from dagflow.plan import Plan


def prepare_condor(plan: Plan, runs_dir: Path, data_mode: str | None = None) -> Prepared:
    """The run directory for plan under runs_dir with the compiled DAG in condor/; nothing submitted."""
    engine = CondorEngine(runs_dir, {"data_mode": data_mode})
    layout, _ = run_session(engine).create(plan, Path(runs_dir))
    return load_prepared(layout)
