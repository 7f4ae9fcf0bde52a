"""The Grid Engine engine's entry points: submit a plan, resume, cancel, wait, behind the Engine contract.

A run directory is the local engine's (plan.json, journal.jsonl, logs/) plus `sge/` (see records.py).
Nothing runs on this machine between submit and status: Grid Engine holds the DAG (`-hold_jid`,
`-hold_jid_ad`), the node wrapper journals each node and stops below a failure, and status folds in what
only Grid Engine knows.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineBase, EngineOption, Report
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.local.graph import check_plan
from dagflow.engines.sge import commands
from dagflow.engines.sge.observe import append_events, is_sge_run, read_sge_status, reconcile
from dagflow.engines.sge.records import SgeRecords
from dagflow.engines.sge.settings import DEFAULT_PE, SGE_OPTIONS
from dagflow.engines.sge.submit import submit_nodes
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.ids import validate_run_id
from dagflow.run.journal import DONE_STATES
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, find_run
from dagflow.run.status import RunStatus

QDEL_AGAIN_S = 3.0


class SgeRunError(DagflowError):
    pass


def prepare_sge(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunLayout:
    """Check the plan and create its run directory with the engine's files; submit nothing."""
    validate_run_id(plan.run_id)
    check_plan(plan)
    layout = RunLayout(Path(runs_dir).absolute(), plan.run_id)
    if layout.exists():
        raise SgeRunError(f"run {plan.run_id} already exists in {layout.runs_dir}; choose another --run-id")
    layout.create(plan, engine="sge")
    SgeRecords(layout.run_dir).create()
    return layout


def _submit(layout: RunLayout, plan: Plan, todo: list[str], resume: bool, arrays: bool, pe: str) -> Submitted:
    records = SgeRecords(layout.run_dir)
    sub = records.latest()[0] + 1
    started = time.perf_counter()
    append_events(layout.journal_path, [{"e": "run", "engine": "sge", "sub": sub, "resume": resume}])
    try:
        jobs = submit_nodes(plan, layout.run_dir, todo, sub, arrays, pe) if todo else []
    except DagflowError:
        append_events(layout.journal_path, [{"e": "finish", "s": "interrupted"}])
        raise
    return Submitted(layout, sub, len(todo), [record.job for record in jobs], time.perf_counter() - started)


def submit_sge(plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR, arrays: bool = True, pe: str = DEFAULT_PE) -> Submitted:
    """Create the run directory and submit every node; returns once Grid Engine holds the whole DAG.

    arrays=False submits one job per node even where a job array would do (for comparison).
    """
    commands.max_array_size()  # fail with "no Grid Engine reachable" before creating anything
    layout = prepare_sge(plan, runs_dir)
    return _submit(layout, plan, list(plan.nodes), resume=False, arrays=arrays, pe=pe)


def resume_sge(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR, pe: str = DEFAULT_PE) -> Submitted:
    """Submit again every node of the run that has not succeeded (failed, cancelled, never started)."""
    layout = find_run(Path(runs_dir).absolute(), run_id)
    if not is_sge_run(layout):
        raise SgeRunError(f"run {layout.run_id} was not run with the Grid Engine engine")
    plan = layout.load_plan()
    journal, queued = reconcile(layout, plan)
    if queued:
        raise SgeRunError(
            f"run {layout.run_id} still has {len(queued)} node(s) queued in Grid Engine; "
            f"wait for them or `dagflow cancel {layout.run_id}` first"
        )
    done = {name for name, record in journal.nodes.items() if record.state in DONE_STATES}
    layout.mark_latest()
    return _submit(layout, plan, [name for name in plan.nodes if name not in done], True, True, pe)


def cancel_sge(run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR, timeout_s: float = 300) -> RunStatus:
    """qdel every job of the run's latest submission; running nodes end as interrupted.

    Descendants first, so that deleting a parent releases no held child, and again every few seconds for
    what is still queued: the qmaster of a big array can answer a qdel before it has deleted every task.
    """
    layout = find_run(Path(runs_dir).absolute(), run_id)
    if not is_sge_run(layout):
        raise SgeRunError(f"run {layout.run_id} was not run with the Grid Engine engine")
    records = SgeRecords(layout.run_dir)
    sub, jobs = records.latest()
    records.mark_cancelled(sub)
    numbers = [record.job for record in reversed(jobs)]
    deadline = time.monotonic() + timeout_s
    while True:
        left = set(numbers) & {job.job_id for job in commands.queued_jobs()}
        if not left or time.monotonic() > deadline:
            break
        commands.qdel([number for number in numbers if number in left])
        time.sleep(QDEL_AGAIN_S)
    return wait_sge(layout, poll_s=0.5, timeout_s=60)


def wait_sge(layout: RunLayout, poll_s: float = 1.0, timeout_s: float | None = None) -> RunStatus:
    """Poll until Grid Engine holds none of the run's jobs; return the final status."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        status = read_sge_status(layout)
        if not status.runner_alive or (deadline is not None and time.monotonic() > deadline):
            return status
        time.sleep(poll_s)


class SgeEngine(EngineBase):
    """The Engine contract over qsub/qstat/qdel."""

    name: ClassVar[str] = "sge"
    summary: ClassVar[str] = "a Grid Engine cluster: qsub jobs (arrays where the wiring allows) with -hold_jid"
    options: ClassVar[tuple[EngineOption, ...]] = SGE_OPTIONS
    honours: ClassVar[frozenset[str]] = frozenset({"cpus", "memory", "gpus", "timeout", "runtime.python"})

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.last: Submitted | None = None  # the latest submission, for submitted()

    @property
    def pe(self) -> str:
        return str(self.settings.get("sge_pe") or DEFAULT_PE)

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        if plan.run_id != Path(run_dir).name:
            raise SgeRunError(f"run_dir {run_dir} must be named after the plan's run id {plan.run_id}")
        prepare_sge(plan, Path(run_dir).absolute().parent)

    def submit(self, plan: Plan, run_dir: Path) -> str:
        """Submit the prepared run (every node), or resubmit what did not finish of a submitted one."""
        layout = RunLayout.from_run_dir(run_dir)
        if not layout.exists():
            commands.max_array_size()  # fail with "no Grid Engine reachable" before creating anything
            self.prepare(plan, layout.run_dir)
        if SgeRecords(layout.run_dir).latest()[0]:
            return self.resume(layout.run_dir)
        self.last = _submit(layout, plan, list(plan.nodes), resume=False, arrays=True, pe=self.pe)
        return ",".join(self.last.jobs)

    def resume(self, run_dir: Path) -> str:
        layout = RunLayout.from_run_dir(run_dir)
        self.last = resume_sge(layout.run_id, layout.runs_dir, self.pe)
        return ",".join(self.last.jobs)

    def wait(self, run_dir: Path) -> None:
        wait_sge(RunLayout.from_run_dir(run_dir))

    def read_status(self, layout: RunLayout) -> RunStatus:
        return read_sge_status(layout)

    def cancel(self, run_dir: Path) -> None:
        layout = RunLayout.from_run_dir(run_dir)
        cancel_sge(layout.run_id, layout.runs_dir)

    def submitted(self, run_dir: Path, handle: str) -> Report:
        if self.last is None:
            raise SgeRunError(f"run {Path(run_dir).name}: this engine submitted nothing")
        return self.last.report(self.name, "Grid Engine")
