"""The local engine: runs a Plan's nodes as processes on this machine, in the foreground (`dagflow run`) or as
a detached background runner (`dagflow submit --engine local`, search trials), behind the run session
(run/session.py), which makes the run directory, asks the live-run rule and re-plans an edited run.

Rerun semantics. `dagflow run --resume ID` continues one run: the journal says what finished, and only the
rest runs. Running a pipeline again (`dagflow run pipeline.yaml`) starts a new run with a new id, and the
cache decides node by node: whatever succeeded before with the same command, environment, params, input
content and upstream is skipped and shown as cached. The cache, unlike a journal, stays correct when the
pipeline or its input files changed between the two runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from dagflow.engines.base import EngineOption
from dagflow.engines.jobs.driven import DrivenEngine, start_driver
from dagflow.engines.local.cpu_only import CPU_ONLY
from dagflow.engines.local.cpu_only import note as cpu_only_note
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.orphans import stop_cut_short
from dagflow.engines.local.recovery import unjournaled_nodes
from dagflow.engines.local.resources import Machine, ResourceError, detect_machine, infeasible
from dagflow.engines.local.runner import LocalRunner
from dagflow.engines.local.settings import LOCAL_OPTIONS
from dagflow.engines.local.stop_channel import ask_stop
from dagflow.plan import Plan
from dagflow.plan.graph import PlanError, check_plan
from dagflow.run.layout import RunLayout
from dagflow.run.reports import Launched
from dagflow.run.result import RunResult
from dagflow.run.status import RunStatus

if TYPE_CHECKING:
    from dagflow.run.reporting import Reporter
    from dagflow.run.session import Work


def check_runnable(plan: Plan, options: RunOptions) -> Machine:
    """Everything that can be wrong before a node starts: the plan, --force names, resources."""
    check_plan(plan)
    if options.jobs is not None and options.jobs < 1:
        raise ResourceError(f"--jobs must be at least 1, not {options.jobs}")
    known = set(plan.steps) | set(plan.nodes)
    unknown = [name for name in options.force if name not in known]
    if unknown:
        raise PlanError(
            f"--force {unknown[0]}: no such step or node (steps: {', '.join(sorted(plan.steps)) or 'none'})"
        )
    need_gpus = any(plan.steps[node.step].resources.gpus for node in plan.nodes.values())
    machine = detect_machine(options.gpus, need_gpus)
    problems = infeasible(plan, machine)
    if problems:
        raise ResourceError("these nodes can never start on this machine:\n  " + "\n  ".join(problems))
    return machine


class LocalEngine(DrivenEngine):
    """Runs nodes as processes on this machine: in the foreground (`dagflow run`) or as a detached runner."""

    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "run the nodes on this machine"
    driver_word: ClassVar[str] = "runner"
    left_holder: ClassVar[str] = "its keeper"
    options: ClassVar[tuple[EngineOption, ...]] = LOCAL_OPTIONS
    honours: ClassVar[frozenset[str]] = frozenset(
        {"cpus", "memory", "memory_max", "disk", "gpus", "gpu_memory", "priority", "timeout", "runtime.python"}
    )

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.run_options = self.options_with()  # what a run here gets (an embedding program may replace it)
        self._machine: tuple[str, Machine] | None = None  # prepare's look at this machine, for that run

    def options_with(self) -> RunOptions:
        given = self.settings
        return RunOptions(
            runs_dir=self.runs_dir,
            jobs=given["jobs"],
            gpus=given["gpus"],
            force=tuple(given["force"] or ()),
            use_cache=not given["no_cache"],
            kill_grace_s=given["kill_grace"],
            engine=self.name,
        )

    # The backend the run session drives.

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        self._check_devices()  # before the run is made: an error here, not in a detached runner's log
        self._machine = (plan.run_id, check_runnable(plan, self.run_options))

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None:
        return None  # an edited pipeline is checked as wherever it runs: its settings may differ now

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """A detached `dagflow run --resume` on the run (its session finds nothing more to re-plan)."""
        if work.resume:
            self._check_devices()  # before the detached runner starts: an error here, not in its log
        options = self.run_options  # what a run here gets, which an embedding program may have replaced
        given = {
            "jobs": options.jobs, "gpus": options.gpus, "force": options.force, "no_cache": not options.use_cache,
            "kill_grace": options.kill_grace_s,
        }  # fmt: skip
        return Launched(str(start_driver(layout, self.options, given)), background=True)

    def drive(self, layout: RunLayout, work: Work, reporter: Reporter) -> RunResult:
        """`dagflow run`: run work here, in the foreground, telling reporter of each start and end (Ctrl-C and
        SIGTERM stop it cleanly, on the main thread)."""
        options = dataclasses.replace(
            self.run_options, runs_dir=layout.runs_dir, reporter=reporter, handle_signals=True
        )
        return self.run_with(layout, work, options)

    def run_with(self, layout: RunLayout, work: Work, options: RunOptions) -> RunResult:
        """Run work here, in this process, until it ends (Ctrl-C stops it cleanly with options.handle_signals
        on the main thread)."""
        return self.runner(layout, work, options).run()

    def runner(self, layout: RunLayout, work: Work, options: RunOptions) -> LocalRunner:
        """The runner of work in this process: `.run()` drives it to its end."""
        machine = self._machine[1] if self._machine and self._machine[0] == work.plan.run_id else None
        if work.resume:  # prepare checked a new run's devices and machine; a resumed one is checked here
            self._check_devices()
        if machine is None or work.resume:
            machine = check_runnable(work.plan, options)
        return LocalRunner(work.plan, layout, machine, options)

    def read_status(self, layout: RunLayout) -> RunStatus:
        status = super().read_status(layout)
        smoke_test = cpu_only_note(layout.run_dir)
        if smoke_test is not None:
            status.notes.append(smoke_test)
            status.extra["gpus"] = CPU_ONLY
        return status

    # --- what a dead runner left: its keeper's nodes (driven.py) --------------------------------------

    def left_behind(self, layout: RunLayout) -> dict[str, int | None]:
        return unjournaled_nodes(layout)

    def stop_left(self, layout: RunLayout) -> list[str]:
        return stop_cut_short(layout, self.run_options.kill_grace_s)

    def stop_driver(self, layout: RunLayout, pid: int) -> None:
        if not ask_stop(layout.run_dir):  # a runner on a thread: only it stops
            super().stop_driver(layout, pid)

    def _check_devices(self) -> None:
        """--gpus naming a device that is not here is bad input, not a slot to wait for."""
        if self.settings["gpus"] is not None:
            from dagflow.engines.local.devices import check_devices

            check_devices(self.settings["gpus"])


def launch_here(engine: LocalEngine, layout: RunLayout, work: Work, reporter: Reporter) -> LocalRunner:
    """launch, for a program that runs the work on a thread of its own instead of a detached runner (a search's
    trials: no process start-up per trial); the caller's run session marks it started. `.run()` drives it on
    that thread (it holds the run's lock, as a detached runner would) and tells reporter, `.request_stop()`
    stops it from any thread."""
    return engine.runner(layout, work, dataclasses.replace(engine.run_options, reporter=reporter, stop_channel=True))
