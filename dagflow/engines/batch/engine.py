"""The Engine contract over a batch scheduler (Slurm, Grid Engine): prepare, submit, resume, cancel, wait.

A run directory is the local engine's (plan.json, journal.jsonl, logs/) plus the engine's records
(records.py). Nothing runs on this machine between submit and status: the scheduler holds the DAG as job
dependencies, the node wrapper journals each node, and status folds in what only the scheduler knows
(observe.py). An engine subclasses BatchEngine with how its jobs are submitted and cancelled.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineBase, Report
from dagflow.engines.batch.observe import BatchObserver
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.batch.submitted import Submitted
from dagflow.engines.registry import spec_checks
from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Plan
from dagflow.plan.graph import check_plan
from dagflow.run.follow import follow_run, runs_dir_hint, terminal_reporter
from dagflow.run.ids import validate_run_id
from dagflow.run.journal import DONE_STATES, append_events, finish_event, replan_event, run_event
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout, find_run
from dagflow.run.replan import changed_nodes, replanned
from dagflow.run.result import RUN_INTERRUPTED
from dagflow.run.status import RunStatus

WAIT_POLL_S = 1.0  # seconds between two looks at the scheduler's queue while waiting for a run


class BatchEngine(EngineBase):
    """What every batch engine does the same way; subclasses say how their scheduler is driven."""

    # The shared node wrapper (node.py) carries out the timeout and runtime.python; the rest is job options.
    honours: ClassVar[frozenset[str]] = frozenset({"cpus", "memory", "gpus", "timeout", "runtime.python"})
    observer: ClassVar[BatchObserver[Any]]
    run_error: ClassVar[type[DagflowError]]
    foreign_resume_hint: ClassVar[str] = ""  # ends the error of resuming another engine's run

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.last: Submitted | None = None  # the latest submission, for submitted()
        self._observed: RunStatus | None = None  # the status the last ingest found, for the read after it

    @property
    def title(self) -> str:
        return self.observer.title

    @property
    def driver(self) -> str:
        return f"its jobs in {self.title}"

    def check_reachable(self) -> None:
        """Fail with "no <scheduler> reachable" (before anything is created)."""
        raise NotImplementedError

    def submit_nodes(self, plan: Plan, run_dir: Path, todo: list[str], sub: int, arrays: bool) -> list[JobRecord]:
        """Submit the nodes in todo as submission number sub; their job records."""
        raise NotImplementedError

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        """Remove these jobs (a submission's, parents first) from the scheduler."""
        raise NotImplementedError

    def prepare_run(self, plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunLayout:
        """Check the plan and create its run directory with the engine's files; submit nothing."""
        validate_run_id(plan.run_id)
        check_plan(plan)
        layout = RunLayout(Path(runs_dir).absolute(), plan.run_id)
        if layout.exists():
            raise self.run_error(f"run {plan.run_id} already exists in {layout.runs_dir}; choose another --run-id")
        layout.create(plan, engine=self.name)
        self.observer.records(layout.run_dir).create()
        return layout

    def submit_run(self, plan: Plan, runs_dir: Path = DEFAULT_RUNS_DIR, arrays: bool = True) -> Submitted:
        """Create the run directory and submit every node; returns once the scheduler holds the whole DAG.

        arrays=False submits one job per node even where a job array would do (for comparison).
        """
        self.check_reachable()
        layout = self.prepare_run(plan, runs_dir)
        return self._submit(layout, plan, list(plan.nodes), resume=False, arrays=arrays)

    def resume_run(self, run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> Submitted:
        """Submit again every node of the run that has not succeeded (failed, cancelled, never started)."""
        layout = self._find_run(run_id, runs_dir, self.foreign_resume_hint)
        plan = layout.load_plan()
        journal, queued = self.observer.reconcile(layout, plan)
        if queued:
            raise self.run_error(
                f"run {layout.run_id} still has {len(queued)} node(s) queued in {self.title}; "
                f"wait for them or `dagflow cancel {layout.run_id}` first"
            )
        forget: frozenset[str] = frozenset()
        fresh = replanned(layout, plan, spec_checks(self.name, self.settings))
        if fresh is not None:  # the pipeline file was edited: run what the edit changed, and what follows it
            forget = changed_nodes(plan, fresh)
            write_atomic(layout.plan_path, fresh.to_json().encode())
            layout.record_pipeline(fresh)
            append_events(layout.journal_path, [replan_event(sorted(forget & journal.nodes.keys()))])
            plan = fresh
        done = {name for name, record in journal.nodes.items() if record.state in DONE_STATES and name not in forget}
        if fresh is not None:
            kept = sum(1 for name in plan.nodes if name in done)
            print(
                f"dagflow: {plan.source} changed since run {layout.run_id} was planned: re-planned from it "
                f"({kept} finished node(s) kept, {len(plan.nodes) - kept} to run)",
                file=sys.stderr,
            )
        return self._submit(layout, plan, [name for name in plan.nodes if name not in done], resume=True)

    def cancel_run(self, run_id: str | None, runs_dir: Path = DEFAULT_RUNS_DIR) -> RunStatus:
        """Cancel every job of the run's latest submission; running nodes end as interrupted."""
        layout = self._find_run(run_id, runs_dir)
        records = self.observer.records(layout.run_dir)
        sub, jobs = records.latest()
        records.mark_cancelled(sub)
        if jobs:
            self.cancel_jobs(jobs)
        return self.wait_run(layout, poll_s=0.5, timeout_s=60)

    def wait_run(self, layout: RunLayout, poll_s: float = WAIT_POLL_S, timeout_s: float | None = None) -> RunStatus:
        """Poll until the scheduler holds none of the run's jobs; return the final status."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            status = self.observer.observe(layout)
            if not status.runner_alive or (deadline is not None and time.monotonic() > deadline):
                return status
            time.sleep(poll_s)

    def _find_run(self, run_id: str | None, runs_dir: Path, hint: str = "") -> RunLayout:
        layout = find_run(Path(runs_dir).absolute(), run_id)
        if not self.observer.is_run(layout):
            raise self.run_error(f"run {layout.run_id} was not run with the {self.title} engine{hint}")
        return layout

    def _submit(self, layout: RunLayout, plan: Plan, todo: list[str], resume: bool, arrays: bool = True) -> Submitted:
        sub = self.observer.records(layout.run_dir).latest()[0] + 1
        started = time.perf_counter()
        append_events(layout.journal_path, [run_event(resume, engine=self.name, sub=sub)])
        try:
            jobs = self.submit_nodes(plan, layout.run_dir, todo, sub, arrays) if todo else []
        except DagflowError:
            append_events(layout.journal_path, [finish_event(RUN_INTERRUPTED)])
            raise
        layout.mark_latest()  # only a submission the scheduler took
        return Submitted(layout, sub, len(todo), [record.job for record in jobs], time.perf_counter() - started)

    # The Engine contract.

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        if plan.run_id != Path(run_dir).name:
            raise self.run_error(f"run_dir {run_dir} must be named after the plan's run id {plan.run_id}")
        self.prepare_run(plan, Path(run_dir).absolute().parent)

    def submit(self, plan: Plan, run_dir: Path) -> str:
        """Submit the prepared run (every node), or resubmit what did not finish of a submitted one."""
        layout = RunLayout.from_run_dir(run_dir)
        if not layout.exists():
            self.check_reachable()
            self.prepare(plan, layout.run_dir)
        if self.observer.records(layout.run_dir).latest()[0]:
            return self.resume(layout.run_dir)
        self.last = self._submit(layout, plan, list(plan.nodes), resume=False)
        return ",".join(self.last.jobs)

    def resume(self, run_dir: Path) -> str:
        layout = RunLayout.from_run_dir(run_dir)
        self.last = self.resume_run(layout.run_id, layout.runs_dir)
        return ",".join(self.last.jobs)

    def wait(self, run_dir: Path) -> None:
        self.wait_run(RunLayout.from_run_dir(run_dir))

    def ingest(self, run_dir: Path) -> bool:
        """Journal what only the scheduler knows (jobs that left its queue, the run's end): observe.py."""
        layout = RunLayout.from_run_dir(run_dir)
        before = layout.journal_path.stat().st_size if layout.journal_path.exists() else 0
        self._observed = self.observer.observe(layout)
        return layout.journal_path.stat().st_size != before

    def read_status(self, layout: RunLayout) -> RunStatus:
        observed, self._observed = self._observed, None  # what an ingest just found: not asked for again
        if observed is not None and observed.layout.run_dir == layout.run_dir:
            return observed
        return self.observer.read_status(layout)

    def run(self, plan: Plan | None, run_dir: Path, json_output: bool) -> int | None:
        """Submit (or resume) the run and wait for it, showing it as a local run shows (live view, event
        lines, summary) from what each look at the queue and the journal finds; with --json, the caller
        prints the final status."""
        if json_output:
            return super().run(plan, run_dir, json_output)
        layout = RunLayout.from_run_dir(run_dir)
        before = None
        if plan is None:
            before = self.observer.read_status(layout)
            self.resume(run_dir)
        else:
            self.submit(plan, run_dir)
        jobs = self.last.jobs if self.last is not None else []
        shown = ", ".join(jobs[:3]) + (", ..." if len(jobs) > 3 else "")
        result = follow_run(
            lambda: self.observer.observe(layout),
            terminal_reporter(runs_dir_hint(self.runs_dir), show_starts=True),
            where=f"{self.title} (job{'s' if len(jobs) > 1 else ''} {shown})" if jobs else self.title,
            poll_s=WAIT_POLL_S,
            before=before,
        )
        return result.exit_code

    def cancel(self, run_dir: Path) -> None:
        layout = RunLayout.from_run_dir(run_dir)
        self.cancel_run(layout.run_id, layout.runs_dir)

    def submitted(self, run_dir: Path, handle: str) -> Report:
        if self.last is None:
            raise self.run_error(f"run {Path(run_dir).name}: this engine submitted nothing")
        return self.last.report(self.name, self.title)
