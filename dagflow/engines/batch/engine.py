"""The Engine contract over a batch scheduler (Slurm, Grid Engine): prepare, launch, cancel, wait.

A run directory is the local engine's (plan.json, journal.jsonl, logs/) plus the engine's records
(records.py). Nothing runs on this machine between submit and status: the scheduler holds the DAG as job
dependencies, the node wrapper journals each node, and status folds in what only the scheduler knows
(observe.py). An engine subclasses BatchEngine with how its jobs are submitted and cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineBase
from dagflow.engines.batch.observe import BatchObserver
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.batch.submitted import Submitted
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.plan.graph import check_plan
from dagflow.run.journal import append_events, finish_event, run_event
from dagflow.run.layout import RunLayout
from dagflow.run.reports import Launched
from dagflow.run.result import RUN_INTERRUPTED
from dagflow.run.session import Work
from dagflow.run.status import RunStatus

WAIT_POLL_S = 1.0  # seconds between two looks at the scheduler's queue while waiting for a run


class BatchEngine(EngineBase):
    """What every batch engine does the same way; subclasses say how their scheduler is driven."""

    # The shared node wrapper (node.py) carries out the timeout and runtime.python; the rest is job options.
    honours: ClassVar[frozenset[str]] = frozenset({"cpus", "memory", "gpus", "timeout", "runtime.python"})
    observer: ClassVar[BatchObserver[Any]]
    poll_s: ClassVar[float] = WAIT_POLL_S
    run_error: ClassVar[type[DagflowError]]

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.last: Submitted | None = None  # the latest submission
        self._observed: RunStatus | None = None  # the status the last ingest found, for the read after it
        self.arrays = True  # False: one job per node even where a job array would do (for comparison)

    @property
    def driver(self) -> str:
        return f"its jobs in {self.system}"

    def check_reachable(self) -> None:
        """Fail with "no <scheduler> reachable" (before anything is created)."""
        raise NotImplementedError

    def submit_nodes(self, plan: Plan, run_dir: Path, todo: list[str], sub: int, arrays: bool) -> list[JobRecord]:
        """Submit the nodes in todo as submission number sub; their job records."""
        raise NotImplementedError

    def cancel_jobs(self, jobs: list[JobRecord]) -> None:
        """Remove these jobs (a submission's, parents first) from the scheduler."""
        raise NotImplementedError

    def cancel_run(self, layout: RunLayout) -> RunStatus:
        """Cancel every job of the run's latest submission; running nodes end as interrupted."""
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

    def _submit(self, layout: RunLayout, plan: Plan, todo: list[str], resume: bool, arrays: bool = True) -> Submitted:
        sub = self.observer.records(layout.run_dir).latest()[0] + 1
        started = time.perf_counter()
        append_events(layout.journal_path, [run_event(resume, engine=self.name, sub=sub)])
        try:
            jobs = self.submit_nodes(plan, layout.run_dir, todo, sub, arrays) if todo else []
        except DagflowError:
            append_events(layout.journal_path, [finish_event(RUN_INTERRUPTED)])
            raise
        return Submitted(layout, sub, len(todo), [record.job for record in jobs], time.perf_counter() - started)

    # The backend the run session drives.

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        """Check the plan; for a new run, that the scheduler answers, and make the engine's records."""
        check_plan(plan)
        records = self.observer.records(Path(run_dir))
        if not records.exists():
            self.check_reachable()
            records.create()

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """Submit work's nodes; returns once the scheduler holds them all (their DAG as job dependencies)."""
        last = self.last = self._submit(layout, work.plan, list(work.todo), resume=work.resume, arrays=self.arrays)
        seconds = round(last.seconds, 3)
        facts = {"submission": last.sub, "nodes": last.nodes, "jobs": last.jobs, "seconds": seconds}
        return Launched(",".join(last.jobs), facts, jobs=tuple(last.jobs), nodes=last.nodes, seconds=seconds)

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

    def cancel(self, run_dir: Path) -> None:
        self.cancel_run(RunLayout.from_run_dir(run_dir))
