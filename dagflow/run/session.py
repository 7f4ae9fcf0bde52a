"""One run's lifecycle, the same on every engine: the run directory made and its engine recorded, the live-run
rule (live_runs.py) asked before anything starts or continues, and a continued run re-planned after an edit of
its pipeline file. Every caller that starts or continues a run (the CLI, schedules, search trials, embedding
programs) goes through a RunSession; an engine is only the backend it drives:

    session = RunSession(engine, live_of)           # engines/registry.py run_session builds one
    layout, work = session.start(plan, runs_dir)    # a new run, or the cut-short run it is exactly
    work = session.proceed(layout)                  # `--resume`, `resubmit`
    handle = engine.launch(layout, work)            # or engine.run(layout, work, ...) in the foreground

What a backend gives the session (engines/base.py Engine): its name, `prepare(plan, run_dir)` (the files it
generates for a plan, written before plan.json marks the run made, and again after a re-plan), `ingest` and
`read_status` (which nodes finished), and `continuing(layout)` (its refusal of a continuation it cannot
make, and the settings an edited pipeline is checked with).
"""

from __future__ import annotations

import dataclasses
import errno
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Plan
from dagflow.run.ids import validate_run_id
from dagflow.run.journal import DONE_STATES, append_events, replan_event
from dagflow.run.layout import RunLayout
from dagflow.run.live_runs import LiveOf, admit_continued, admit_new
from dagflow.run.replan import changed_nodes, replanned
from dagflow.run.status import write_plan_index
from dagflow.text import plural

if TYPE_CHECKING:
    from dagflow.run.status import RunStatus
    from dagflow.spec.load import SpecCheck


class RunExistsError(DagflowError):
    """A new run's id names a run that exists (exit code 2)."""


class RunStorageError(DagflowError):
    """A run's directory cannot be written (a full disk): nothing more is started; resume when there is room."""


@dataclass(frozen=True, slots=True)
class Work:
    """What a launch starts: the run's plan and the nodes to run."""

    plan: Plan
    todo: tuple[str, ...]  # a new run: every node; a continued one: what did not finish, or the edit changed
    resume: bool = False  # an existing run is continued
    edited: bool = False  # re-planned from its edited pipeline file


class Backend(Protocol):
    name: str

    def prepare(self, plan: Plan, run_dir: Path) -> None: ...

    def ingest(self, run_dir: Path) -> bool: ...

    def read_status(self, layout: RunLayout) -> RunStatus: ...

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None: ...


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
            if error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
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
            if not dry_run:
                layout.mark_latest()
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
            layout.mark_latest()
        return Work(fresh, todo, resume=True, edited=True)
