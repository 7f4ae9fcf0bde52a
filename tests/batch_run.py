"""Slurm and Grid Engine runs started, continued and waited for through the run session
(dagflow/run/session.py) and the registry, as `dagflow submit`, `resubmit` and `submit --wait` do."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from dagflow.engines.batch.engine import BatchEngine
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.registry import load_engine, run_session
from dagflow.plan import Plan
from dagflow.run.layout import RunLayout, find_run
from dagflow.run.status import RunStatus


def _engine(name: str, runs_dir: Path, settings: dict[str, Any] | None = None) -> BatchEngine:
    return cast(BatchEngine, load_engine(name, runs_dir, settings))


def submit(name: str, plan: Plan, runs_dir: Path, arrays: bool = True, **settings: Any) -> Submitted:
    """A new run of plan, every node submitted; returns once the scheduler holds the whole DAG (arrays False:
    one job per node even where a job array would do)."""
    engine = _engine(name, runs_dir, settings)
    engine.arrays = arrays
    layout, work = run_session(engine).start(plan, runs_dir)
    engine.launch(layout, work)
    assert engine.last is not None
    return engine.last


def resume(name: str, run_id: str | None, runs_dir: Path, **settings: Any) -> Submitted:
    """Submit again every node of the run that has not succeeded, re-planned after an edit."""
    engine = _engine(name, runs_dir, settings)
    layout = find_run(Path(runs_dir).absolute(), run_id)
    engine.launch(layout, run_session(engine).proceed(layout))
    assert engine.last is not None
    return engine.last


def wait(name: str, layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    """Poll until the scheduler holds none of the run's jobs; the final status."""
    return _engine(name, layout.runs_dir).wait_run(layout, poll_s, timeout_s)


def submit_slurm(plan: Plan, runs_dir: Path, arrays: bool = True) -> Submitted:
    return submit("slurm", plan, runs_dir, arrays)


def resume_slurm(run_id: str | None, runs_dir: Path) -> Submitted:
    return resume("slurm", run_id, runs_dir)


def wait_slurm(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    return wait("slurm", layout, poll_s, timeout_s)


def submit_sge(plan: Plan, runs_dir: Path, arrays: bool = True) -> Submitted:
    return submit("sge", plan, runs_dir, arrays)


def resume_sge(run_id: str | None, runs_dir: Path) -> Submitted:
    return resume("sge", run_id, runs_dir)


def wait_sge(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    return wait("sge", layout, poll_s, timeout_s)
