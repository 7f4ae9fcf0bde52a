"""The job-executor tier: an engine that runs single nodes, driven by dagflow's own DAG scheduler.

A job executor subclasses JobExecutor and writes three methods, as Snakemake's executor plugins do; the
scheduler (scheduler.py) owns the DAG, the ready queue, retries (`unless_exit`), timeouts, checkpoint
restarts, the cache, the journal, cancelling and exactly-once after a kill -9, and this class answers the
engine contract (engines/base.py) for it: `dagflow run` drives the run in the foreground, `submit` in a
detached `dagflow run --resume`; status, the live-run fact and `cancel` are every driven engine's (driven.py).

    run_job(job) -> str                 start one attempt of one node (not waiting for it); its id there
    check_active(jobs) -> {key: state}  what became of each job (JobState), jobs this process did not start
                                        included: a job it never heard of is UNKNOWN
    cancel_jobs(jobs) -> None           stop them; asking again, or for ended jobs, is no error

Exactly once. Every attempt has a key (`Job.key`: run id, node, attempt) that the executor attaches to what
it submits and finds it again by, whoever asks. The scheduler journals an attempt's start after run_job
returned; a driver killed in between leaves a job the journal does not name, so the next driver asks
check_active about each unfinished node's next attempt too, and adopts what it finds. A node therefore
runs in one job at a time, and a result the journal lacks is taken, not run again.

An executor declares, beside the class attributes of engines/base.py (name, summary, options, honours,
system): `poll_s`, seconds between two check_active calls, `max_active`, how many jobs it keeps
started at once unless `--jobs` says otherwise, and `look_grace_s`, how long check_active may keep failing
(its scheduler restarting) before the driver stops. A problem with one job (a command the executor cannot
express, a refused submission) raises JobError: that attempt fails with its message; any other exception
stops the run, its jobs running on for the next driver to adopt.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from dagflow.engines.base import EngineOption
from dagflow.engines.jobs.driven import DrivenEngine, start_driver
from dagflow.engines.jobs.job import ENDED, Job, JobState, jobs_started, known_jobs, unfinished_jobs
from dagflow.engines.jobs.options import SCHEDULER_OPTIONS
from dagflow.engines.jobs.scheduler import JobScheduler
from dagflow.plan import Plan
from dagflow.plan.graph import check_plan
from dagflow.run.journal import INTERRUPTED, append_events, end_event, finish_event, read_journal, start_event
from dagflow.run.layout import RunLayout
from dagflow.run.reports import Launched

if TYPE_CHECKING:
    from dagflow.run.reporting import Reporter
    from dagflow.run.result import RunResult
    from dagflow.run.session import Work


class JobExecutor(DrivenEngine):
    """The base of every job executor: the engine contract answered with dagflow's scheduler."""

    options: ClassVar[tuple[EngineOption, ...]] = SCHEDULER_OPTIONS
    poll_s: ClassVar[float] = 1.0
    max_active: ClassVar[int] = 100
    look_grace_s: ClassVar[float] = 300.0  # how long check_active may keep failing before the driver stops

    # --- what an executor writes ------------------------------------------------------------------------

    def run_job(self, job: Job) -> str:
        raise NotImplementedError

    def check_active(self, jobs: Sequence[Job]) -> dict[str, JobState]:
        raise NotImplementedError

    def cancel_jobs(self, jobs: Sequence[Job]) -> None:
        raise NotImplementedError

    def check(self, plan: Plan) -> None:
        """Refuse a plan this executor cannot run (DagflowError), before its run is made."""

    # --- the engine contract ----------------------------------------------------------------------------

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        check_plan(plan)
        self.check(plan)

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """A detached `dagflow run --resume` drives the run (its session finds nothing more to re-plan)."""
        pid = start_driver(layout, type(self).options, self.settings)
        return Launched(str(pid), background=True)

    def drive(self, layout: RunLayout, work: Work, reporter: Reporter) -> RunResult:
        """`dagflow run`: drive the run here, in the foreground, until it ends (Ctrl-C and SIGTERM cancel
        its jobs, on the main thread)."""
        return JobScheduler(self, work, layout, reporter, handle_signals=True).run()

    # --- what a dead driver left (driven.py) -------------------------------------------------------------

    def left_behind(self, layout: RunLayout) -> dict[str, int | None]:
        return {name: None if state.state != ENDED else -1 if state.rc is None else state.rc
                for name, (_, state) in self._left_jobs(layout).items()}  # fmt: skip

    def stop_left(self, layout: RunLayout) -> list[str]:
        """Cancel the jobs a dead driver left running and journal them interrupted."""
        found = self._left_jobs(layout)
        live = [job for job, state in found.values() if state.state != ENDED]
        if live:
            self.cancel_jobs(live)
            journal = read_journal(layout.journal_path)
            events = []
            for job in live:
                if job.attempt > jobs_started(journal.nodes.get(job.node)):  # never journaled
                    events.append(start_event(job.node, job.attempt))
                events.append(end_event(job.node, INTERRUPTED, attempt=job.attempt, why="stopped by dagflow cancel"))
            if len(live) == len(found):
                events.append(finish_event(INTERRUPTED))
            append_events(layout.journal_path, events)
        return sorted(job.node for job in live)

    def _left_jobs(self, layout: RunLayout) -> dict[str, tuple[Job, JobState]]:
        """The jobs of the run's unfinished nodes that the executor knows, by node (job.py unfinished_jobs)."""
        journal = read_journal(layout.journal_path)
        asked = unfinished_jobs(layout.load_plan(), layout, journal, journal.done())
        return known_jobs(self.check_active(asked) if asked else {}, asked)
