"""The Slurm engine's entry points: submit a plan, resume, cancel, wait, behind the Engine contract.

A run directory is the local engine's (plan.json, journal.jsonl, logs/) plus `slurm/` (see records.py).
Nothing runs on this machine between submit and status: Slurm holds the DAG (`afterok`/`aftercorr`
dependencies), the node wrapper journals each node, and status folds in what only Slurm knows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineBase, EngineOption, Report
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.local.graph import check_plan
from dagflow.engines.slurm import commands
from dagflow.engines.slurm.observe import append_events, is_slurm_run, read_slurm_status, reconcile
from dagflow.engines.slurm.records import SlurmRecords
from dagflow.engines.slurm.script import NODE_SH
from dagflow.engines.slurm.settings import SLURM_OPTIONS
from dagflow.engines.slurm.submit import submit_nodes
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.ids import validate_run_id
from dagflow.run.journal import DONE_STATES
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, find_run
from dagflow.run.status import RunStatus


class SlurmRunError(DagflowError):
    pass


def prepare_slurm(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunLayout:
    """Check the plan and create its run directory with the Slurm engine's files; submit nothing."""
    validate_run_id(plan.run_id)
    check_plan(plan)
    layout = RunLayout(Path(runs_dir).absolute(), plan.run_id)
    if layout.exists():
        raise SlurmRunError(f"run {plan.run_id} already exists in {layout.runs_dir}; choose another --run-id")
    layout.create(plan, engine="slurm")
    SlurmRecords(layout.run_dir).create(NODE_SH)
    return layout


def _submit(layout: RunLayout, plan: Plan, todo: list[str], resume: bool, arrays: bool = True) -> Submitted:
    records = SlurmRecords(layout.run_dir)
    sub = records.latest()[0] + 1
    started = time.perf_counter()
    append_events(layout.journal_path, [{"e": "run", "engine": "slurm", "sub": sub, "resume": resume}])
    try:
        jobs = submit_nodes(plan, layout.run_dir, todo, sub, arrays) if todo else []
    except DagflowError:
        append_events(layout.journal_path, [{"e": "finish", "s": "interrupted"}])
        raise
    return Submitted(layout, sub, len(todo), [record.job for record in jobs], time.perf_counter() - started)


def submit_slurm(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR, arrays: bool = True) -> Submitted:
    """Create the run directory and submit every node; returns once Slurm holds the whole DAG.

    arrays=False submits one job per node even where a job array would do (for comparison).
    """
    commands.max_array_size()  # fail with "no Slurm reachable" before creating anything
    layout = prepare_slurm(plan, runs_dir)
    return _submit(layout, plan, list(plan.nodes), resume=False, arrays=arrays)


def resume_slurm(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> Submitted:
    """Submit again every node of the run that has not succeeded (failed, cancelled, never started)."""
    layout = find_run(Path(runs_dir).absolute(), run_id)
    if not is_slurm_run(layout):
        raise SlurmRunError(
            f"run {layout.run_id} was not run with the Slurm engine; resume it with `dagflow run --resume`"
        )
    plan = layout.load_plan()
    journal, queued = reconcile(layout, plan)
    if queued:
        raise SlurmRunError(
            f"run {layout.run_id} still has {len(queued)} node(s) queued in Slurm; "
            f"wait for them or `dagflow cancel {layout.run_id}` first"
        )
    done = {name for name, record in journal.nodes.items() if record.state in DONE_STATES}
    layout.mark_latest()
    return _submit(layout, plan, [name for name in plan.nodes if name not in done], resume=True)


def cancel_slurm(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunStatus:
    """scancel every job of the run's latest submission; running nodes end as interrupted."""
    layout = find_run(Path(runs_dir).absolute(), run_id)
    if not is_slurm_run(layout):
        raise SlurmRunError(f"run {layout.run_id} was not run with the Slurm engine")
    records = SlurmRecords(layout.run_dir)
    sub, jobs = records.latest()
    records.mark_cancelled(sub)
    if jobs:
        commands.scancel([record.job for record in jobs])
    return wait_slurm(layout, poll_s=0.5, timeout_s=60)


def wait_slurm(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    """Poll until Slurm holds none of the run's jobs; return the final status."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = read_slurm_status(layout)
        if not status.runner_alive or (deadline is not None and time.monotonic() > deadline):
            return status
        time.sleep(poll_s)


class SlurmEngine(EngineBase):
    """The Engine contract over sbatch/squeue/scancel."""

    name: ClassVar[str] = "slurm"
    summary: ClassVar[str] = "a Slurm cluster: sbatch jobs (arrays where the wiring allows) with dependencies"
    options: ClassVar[tuple[EngineOption, ...]] = SLURM_OPTIONS
    honours: ClassVar[frozenset[str]] = frozenset({"cpus", "memory", "gpus", "timeout", "runtime.python"})

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.last: Submitted | None = None  # the latest submission, for submitted()

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        if plan.run_id != Path(run_dir).name:
            raise SlurmRunError(f"run_dir {run_dir} must be named after the plan's run id {plan.run_id}")
        prepare_slurm(plan, Path(run_dir).absolute().parent)

    def submit(self, plan: Plan, run_dir: Path) -> str:
        """Submit the prepared run (every node), or resubmit what did not finish of a submitted one."""
        layout = RunLayout.from_run_dir(run_dir)
        if not layout.exists():
            commands.max_array_size()  # fail with "no Slurm reachable" before creating anything
            self.prepare(plan, layout.run_dir)
        if SlurmRecords(layout.run_dir).latest()[0]:
            return self.resume(layout.run_dir)
        self.last = _submit(layout, plan, list(plan.nodes), resume=False)
        return ",".join(self.last.jobs)

    def resume(self, run_dir: Path) -> str:
        layout = RunLayout.from_run_dir(run_dir)
        self.last = resume_slurm(layout.run_id, layout.runs_dir)
        return ",".join(self.last.jobs)

    def wait(self, run_dir: Path) -> None:
        wait_slurm(RunLayout.from_run_dir(run_dir))

    def read_status(self, layout: RunLayout) -> RunStatus:
        return read_slurm_status(layout)

    def cancel(self, run_dir: Path) -> None:
        layout = RunLayout.from_run_dir(run_dir)
        cancel_slurm(layout.run_id, layout.runs_dir)

    def submitted(self, run_dir: Path, handle: str) -> Report:
        if self.last is None:
            raise SlurmRunError(f"run {Path(run_dir).name}: this engine submitted nothing")
        return self.last.report(self.name, "Slurm")
