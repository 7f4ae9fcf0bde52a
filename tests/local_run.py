"""A local run driven in this process through the run session (dagflow/run/session.py), with RunOptions as
the tests give them (a reporter, a cache directory): the way an embedding program runs a plan here.

    result = run_local(plan, RunOptions(runs_dir=tmp_path / "runs", jobs=4))
    result = resume_local(run_id, options)
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.local import LocalEngine, RunOptions
from dagflow.engines.registry import spec_checks
from dagflow.plan import Plan
from dagflow.run.layout import find_run
from dagflow.run.result import RunResult
from dagflow.run.session import RunSession


def _session(options: RunOptions) -> tuple[LocalEngine, RunSession]:
    engine = LocalEngine(options.runs_dir)
    engine.run_options = options
    return engine, RunSession(engine, lambda _layout: None, spec_checks)  # no other live run to ask about


def run_local(plan: Plan, options: RunOptions | None = None) -> RunResult:
    """Run plan to the end in a new run directory `<runs_dir>/<plan.run_id>/`."""
    options = options or RunOptions()
    engine, session = _session(options)
    layout, work = session.create(plan, Path(options.runs_dir))
    return engine.run_with(layout, work, options)


def resume_local(run_id: str | None, options: RunOptions | None = None) -> RunResult:
    """Run again what did not finish in run run_id ("latest" or None: the latest run), re-planned after an edit."""
    options = options or RunOptions()
    engine, session = _session(options)
    layout = find_run(Path(options.runs_dir), run_id)
    return engine.run_with(layout, session.proceed(layout), options)


def create_local(plan: Plan, options: RunOptions | None = None) -> tuple[LocalEngine, Path]:
    """A new run directory for plan, nothing started: the engine and the run directory."""
    engine, session = _session(options or RunOptions())
    layout, _ = session.create(plan, Path(engine.run_options.runs_dir))
    return engine, layout.run_dir


def submit_local(plan: Plan, options: RunOptions | None = None) -> tuple[LocalEngine, Path, str]:
    """A new run of plan started by a detached runner: the engine, the run directory and the runner's pid."""
    engine, session = _session(options or RunOptions())
    layout, work = session.create(plan, Path(engine.run_options.runs_dir))
    return engine, layout.run_dir, engine.launch(layout, work).handle
