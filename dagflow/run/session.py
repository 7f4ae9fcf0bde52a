"""One run's lifecycle, the same on every engine: the run directory made and its engine recorded, the live-run
rule (live_runs.py) asked before anything starts or continues, a continued run re-planned after an edit of
its pipeline file, `latest` marked once the work started, and a run waited for, followed with the live view
or reported (`--json` too). Every caller that starts or continues a run (the CLI, schedules, search trials,
embedding programs) goes through a RunSession; an engine is only the backend it drives:

    session = RunSession(engine, live_of, checks_of)  # engines/registry.py run_session builds one
    layout, work = session.start(plan, runs_dir)      # a new run, or the cut-short run it is exactly
    work = session.proceed(layout)                    # `--resume`, `resubmit`
    launched = session.launch(layout, work)           # started, not waited for (`submit`)
    code = session.run(layout, work, json_output)     # started and followed to its end (`run`)

What a backend gives the session (engines/base.py Engine): its name, `prepare(plan, run_dir)` (the files it
generates for a plan, written before plan.json marks the run made, and again after a re-plan), `launch`
(what it started, as data: Launched), `wait`, `ingest` and `read_status` (which nodes finished), `cancel`
(what it stopped, as data: Cancelled) and `continuing(layout)` (its refusal of a continuation it cannot
make, and the settings an edited pipeline is checked with). An engine whose nodes run in this process
(local) also has `drive(layout, work, reporter)`: `dagflow run` runs the work there, in the foreground,
telling the reporter the session chose of each start and end. Engines never print: every word a command
says about a run is made here, in follow.py and in reports.py.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Plan
from dagflow.run.ids import validate_run_id
from dagflow.run.journal import DONE_STATES, append_events, replan_event
from dagflow.run.layout import RunLayout
from dagflow.run.live_runs import LiveOf, admit_continued, admit_new
from dagflow.run.replan import changed_nodes, replanned
from dagflow.run.reports import Cancelled, Launched, Report, cancelled_report, submitted_report
from dagflow.run.result import EXIT_INTERRUPTED
from dagflow.run.status import write_plan_index
from dagflow.text import plural

if TYPE_CHECKING:
    from dagflow.run.reporting import Reporter
    from dagflow.run.result import RunResult
    from dagflow.run.status import RunStatus
    from dagflow.spec.load import SpecCheck


class RunExistsError(DagflowError):
    """A new run's id names a run that exists (exit code 2)."""


class RunStorageError(DagflowError):
    """A run's directory cannot be written (a full disk): nothing more is started; resume when there is room."""

    @classmethod
    def stopped(cls, layout: RunLayout, error: OSError, left_running: int) -> RunStorageError:
        """What a runner that stopped for a full disk says, its running nodes left for a resume to adopt."""
        run_id = layout.run_id
        left = f"; {left_running} running node(s) left running" if left_running else ""
        return cls(
            f"run {run_id} stopped: cannot write under {layout.runs_dir}: {error.strerror or error}{left}; "
            f"free some space, then `dagflow run --resume {run_id}`"
        )


DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # the errors of a full disk (or quota, or size limit)


def disk_full(error: BaseException) -> bool:
    return isinstance(error, OSError) and error.errno in DISK_FULL


@dataclass(frozen=True, slots=True)
class Work:
    """What a launch starts: the run's plan and the nodes to run."""

    plan: Plan
    todo: tuple[str, ...]  # a new run: every node; a continued one: what did not finish, or the edit changed
    resume: bool = False  # an existing run is continued
    edited: bool = False  # re-planned from its edited pipeline file


class NothingToLaunchError(DagflowError):
    """A continued run has nothing left to start (it succeeded, unedited): `dagflow run --resume` shows it as
    it ended, `resubmit` refuses (exit 2). driver: the job that drove it, as Launched names one."""

    def __init__(self, message: str, driver: str = "") -> None:
        super().__init__(message)
        self.driver = driver


class Backend(Protocol):
    name: str
    system: str  # where its nodes run, as the live view says it ("HTCondor", "Slurm"); "": this machine
    runs_dir: Path  # as the user gave it: the hints in what a command prints name it so
    poll_s: float  # seconds between two looks at a run while following it

    def prepare(self, plan: Plan, run_dir: Path) -> None: ...

    def launch(self, layout: RunLayout, work: Work) -> Launched: ...

    def wait(self, run_dir: Path) -> None: ...

    def ingest(self, run_dir: Path) -> bool: ...

    def read_status(self, layout: RunLayout) -> RunStatus: ...

    def cancel(self, run_dir: Path) -> Cancelled | None: ...

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None: ...


@runtime_checkable
class Foreground(Protocol):
    """An engine whose nodes can run in this process (local): `dagflow run` drives them here."""

    def drive(self, layout: RunLayout, work: Work, reporter: Reporter) -> RunResult: ...


# (engine name, its settings or None) -> the spec checks a pipeline is loaded with (engines/registry.py)
ChecksOf = Callable[[str, "Mapping[str, Any] | None"], "Sequence[SpecCheck]"]


class RunSession:
    """Starts and continues runs of one engine, every one of them past the live-run rule."""

    def __init__(self, engine: Backend, live_of: LiveOf, checks_of: ChecksOf) -> None:
        self.engine = engine
        self.live_of = live_of
        self.checks_of = checks_of

    def start(self, plan: Plan, runs_dir: Path, trial: bool = False, dry_run: bool = False) -> tuple[RunLayout, Work]:
        """A new run of plan under runs_dir, admitted by the live-run rule; a plain re-run that is exactly an
        earlier run cut short continues that run instead. A search trial (trial) never takes over another run,
        and a dry run starts nothing, so it is not asked."""
        runs_dir = Path(runs_dir).absolute()
        if not dry_run:
            admission = admit_new(plan, runs_dir, self.engine.name, self.live_of, adopt=not trial)
            if admission.note:
                print(admission.note, file=sys.stderr)
            if admission.continue_run is not None:
                return admission.continue_run, self.proceed(admission.continue_run, admitted=True)
        layout = RunLayout(runs_dir, plan.run_id)
        if dry_run and not layout.exists():  # an existing run id is refused below
            layout.mark_dry_run()
        return self.create(plan, runs_dir, admitted=True)

    def admit(self, plan: Plan, runs_dir: Path) -> None:
        """Refuse a search trial's run that would share a node with a live run (live_runs.py)."""
        admit_new(plan, Path(runs_dir).absolute(), self.engine.name, self.live_of, adopt=False)

    def create(self, plan: Plan, runs_dir: Path, admitted: bool = False) -> tuple[RunLayout, Work]:
        """Make the run directory: the engine's files first, then plan.json and the engine's name (a run
        directory without plan.json is a creation cut short, and made again). The workdir is made absolute,
        so a resume from another directory runs nodes in the same place."""
        validate_run_id(plan.run_id)
        plan = dataclasses.replace(plan, workdir=os.path.abspath(plan.workdir))
        layout = RunLayout(Path(runs_dir).absolute(), plan.run_id)
        if layout.exists():
            raise RunExistsError(
                f"run {plan.run_id} already exists in {layout.runs_dir}; resume it with "
                f"`dagflow run --resume {plan.run_id}` or choose another --run-id"
            )
        if not admitted:
            self.admit(plan, layout.runs_dir)
        self.engine.prepare(plan, layout.run_dir)
        try:
            layout.create(plan, engine=self.engine.name)
        except OSError as error:
            if not disk_full(error):
                raise
            raise RunStorageError(
                f"cannot create run {plan.run_id} under {layout.runs_dir}: {error.strerror}"
            ) from None
        write_plan_index(layout, plan)  # `dagflow status` reads the index, not the plan (a big one takes seconds)
        return layout, Work(plan, tuple(plan.nodes))

    def proceed(self, layout: RunLayout, dry_run: bool = False, admitted: bool = False) -> Work:
        """Continue the run in layout (`--resume`, `resubmit`): nothing may drive it now and no other live run
        share its nodes. When its pipeline file changed since it was planned, it is re-planned from it:
        plan.json replaced, finished nodes the edit did not change (command, environment, params, declared
        paths and parents, all unchanged too) kept, the rest run again; an edit that does not load fails here,
        with the file's own error. A dry run writes nothing."""
        checks = self.checks_of(self.engine.name, self.engine.continuing(layout))
        if not admitted:
            admit_continued(layout, self.live_of)
        plan = layout.load_plan()
        fresh = replanned(layout, plan, checks)
        self.engine.ingest(layout.run_dir)  # what finished since the engine's last look
        states = self.engine.read_status(layout).node_states()
        if fresh is None:
            todo = tuple(name for name in plan.nodes if states.get(name) not in DONE_STATES)
            return Work(plan, todo, resume=True)
        forget = changed_nodes(plan, fresh)
        todo = tuple(name for name in fresh.nodes if name in forget or states.get(name) not in DONE_STATES)
        kept = len(fresh.nodes) - len(todo)
        print(
            f"dagflow: {fresh.source} changed since run {layout.run_id} was planned: re-planned from it "
            f"({plural(kept, 'finished node')} kept, {len(todo)} to run)",
            file=sys.stderr,
        )
        if not dry_run:
            self.engine.prepare(fresh, layout.run_dir)
            # the nodes the edit changed, journaled for every runner (before the new plan: a re-plan cut short
            # is made again): finished ones run again, and a process of one that a keeper still runs is
            # stale (JournalState.replanned), not to be adopted
            forgotten = sorted(forget & plan.nodes.keys())
            if forgotten:
                append_events(layout.journal_path, [replan_event(forgotten)])
            write_atomic(layout.plan_path, fresh.to_json().encode())
            write_plan_index(layout, fresh)
            layout.record_pipeline(fresh)
        return Work(fresh, todo, resume=True, edited=True)

    def started(self, layout: RunLayout) -> None:
        """The run's work started (launched, or driven here): the one place a run becomes `latest`, so a
        launch that failed, a dry run and a re-plan that started nothing leave the pointer where it was."""
        layout.mark_latest()

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """Start work without waiting for it (`submit`, `resubmit`, a search trial)."""
        launched = self.engine.launch(layout, work)
        if launched.preview is None:
            self.started(layout)
        return launched

    def submit(self, layout: RunLayout, work: Work) -> Report:
        """Launch work; what `submit` and `resubmit` print about it."""
        launched = self.launch(layout, work)
        return submitted_report(layout.run_id, self.engine.name, self.engine.system, launched)

    def cancel(self, layout: RunLayout) -> Report | None:
        """Stop the run; what `cancel` prints, or None once what drove it stopped it (its status tells)."""
        cancelled = self.engine.cancel(layout.run_dir)
        if cancelled is not None:
            return cancelled_report(layout.run_id, self.engine.name, cancelled)
        self.engine.wait(layout.run_dir)  # the engine stops its nodes and journals them
        return None

    def run(self, layout: RunLayout, work: Work, json_output: bool) -> int | None:
        """`dagflow run`: start work and follow it to its end. On an engine that runs it here, its runner
        reports to the live view (JSON events with --json) and the exit code is the run's. Elsewhere the work
        is launched and followed as a local run is shown (follow.py), from what each look at the run finds;
        with --json it is waited for, and None returned: the caller prints the run's final status."""
        from dagflow.run.follow import runs_dir_hint, terminal_reporter

        hint = runs_dir_hint(self.engine.runs_dir)
        if isinstance(self.engine, Foreground):
            from dagflow.run.reporting import JsonReporter

            self.started(layout)
            return self.engine.drive(layout, work, JsonReporter() if json_output else terminal_reporter(hint)).exit_code
        before = self.engine.read_status(layout) if work.resume and not json_output else None
        launched: Launched | None = None
        said = ""
        try:
            launched = self.launch(layout, work)
        except NothingToLaunchError as nothing:
            if not work.resume:
                raise
            driver = nothing.driver  # nothing more to run: its status, as it ended, as a local run's
            self.started(layout)
        else:
            driver = launched.driver
            if driver:
                said = f"resubmitted run {layout.run_id}: {driver}" if work.resume else (
                    f"submitted run {layout.run_id}: {driver}; waiting for it")  # fmt: skip
        try:  # from here on, Ctrl-C stops the waiting, not the run one job drives (as its users expect)
            if said:
                print(said, file=sys.stderr)
            if json_output:
                self.engine.wait(layout.run_dir)
                return None
            result = self._follow(layout, launched, terminal_reporter(hint, show_starts=True), before)
        except KeyboardInterrupt:
            if not driver:
                raise
            run_id = layout.run_id
            print(
                f"dagflow: stopped waiting; run {run_id} keeps running on {self.engine.system} ({driver}): follow "
                f"it with `dagflow status {run_id}{hint}`, cancel it with `dagflow cancel {run_id}{hint}`",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        return result.exit_code

    def _follow(
        self, layout: RunLayout, launched: Launched | None, reporter: Reporter, before: RunStatus | None
    ) -> RunResult:
        """Follow a run the engine launched (None: nothing was left to launch) from what each look finds: the
        engine's ingest, then its status."""
        from dagflow.run.follow import follow_run, stop_notes

        engine = self.engine

        def read() -> RunStatus:
            engine.ingest(layout.run_dir)
            return engine.read_status(layout)

        where = engine.system
        if launched is not None and launched.driver:
            where = f"{where} ({launched.driver})"
        elif launched is not None and launched.jobs:
            jobs = launched.jobs
            shown = ", ".join(jobs[:3]) + (", ..." if len(jobs) > 3 else "")
            where = f"{where} (job{'s' if len(jobs) > 1 else ''} {shown})"
        return follow_run(read, reporter, where, engine.poll_s, before, notes=stop_notes)
