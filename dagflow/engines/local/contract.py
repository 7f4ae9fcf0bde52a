"""The local engine behind the registry's contract: its options, what it honours, and the CLI's run,
resume, wait and cancel on top of LocalEngine (which stays the search scheduler's detached runner)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import EngineBase, EngineOption, Report
from dagflow.engines.local.cpu_only import CPU_ONLY
from dagflow.engines.local.cpu_only import note as cpu_only_note
from dagflow.engines.local.engine import LocalEngine, resume_local, run_local
from dagflow.engines.local.liveness import local_live
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.orphans import stop_cut_short
from dagflow.engines.local.recovery import unjournaled_nodes
from dagflow.engines.local.settings import LOCAL_OPTIONS
from dagflow.plan import Plan
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout
from dagflow.run.live_runs import Live
from dagflow.run.reporting import JsonReporter, PlainReporter, Reporter
from dagflow.run.status import RunStatus, read_status
from dagflow.text import plural


class LocalEngineContract(EngineBase, LocalEngine):
    """Runs nodes as processes on this machine: in the foreground (`dagflow run`) or as a detached runner."""

    name: ClassVar[str] = "local"
    summary: ClassVar[str] = "run the nodes on this machine"
    options: ClassVar[tuple[EngineOption, ...]] = LOCAL_OPTIONS
    honours: ClassVar[frozenset[str]] = frozenset(
        {"cpus", "memory", "memory_max", "disk", "gpus", "gpu_memory", "priority", "timeout", "runtime.python"}
    )

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        EngineBase.__init__(self, runs_dir, settings)
        LocalEngine.__init__(self, self.run_options())
        self._stopped: list[str] | None = None  # what cancel stopped of a run whose runner died

    def run_options(self, reporter: Reporter | None = None, handle_signals: bool = False) -> RunOptions:
        given = self.settings
        return RunOptions(
            runs_dir=self.runs_dir,
            jobs=given["jobs"],
            gpus=given["gpus"],
            force=tuple(given["force"] or ()),
            use_cache=not given["no_cache"],
            kill_grace_s=given["kill_grace"],
            reporter=reporter,
            handle_signals=handle_signals,
            engine=self.name,
        )

    def read_status(self, layout: RunLayout) -> RunStatus:
        status = read_status(layout)
        smoke_test = cpu_only_note(layout.run_dir)
        if smoke_test is not None:
            status.notes.append(smoke_test)
            status.extra["gpus"] = CPU_ONLY
        if not status.runner_alive and not status.journal.finished:
            status.unjournaled = unjournaled_nodes(layout)
            running = sum(1 for rc in status.unjournaled.values() if rc is None)
            if status.unjournaled:
                status.notes.append(
                    f"its runner died: its keeper still runs {plural(running, 'node')}, "
                    f"{len(status.unjournaled) - running} ended since; `dagflow run --resume {layout.run_id}` "
                    "adopts them (so does the command that started it, given again); "
                    f"`dagflow cancel {layout.run_id}` stops them"
                )
        return status

    def live(self, layout: RunLayout) -> Live | None:
        return local_live(layout)

    def cancel(self, run_dir: Path) -> None:
        """Signal the run's runner; with none (it died), stop the nodes its keeper still runs."""
        layout = RunLayout.from_run_dir(run_dir)
        self._stopped = stop_cut_short(layout, self.options.kill_grace_s)
        if self._stopped is None:
            LocalEngine.cancel(self, run_dir)

    def cancelled(self, run_dir: Path) -> Report | None:
        stopped, run_id = self._stopped, Path(run_dir).name
        if stopped is None:
            return None  # its runner stops its nodes: wait for it and show the run's status
        data = {"run_id": run_id, "engine": self.name, "stopped": stopped}
        if not stopped:
            return Report(data, [f"run {run_id} is not running: nothing to stop"])
        shown = ", ".join(stopped[:5]) + (", ..." if len(stopped) > 5 else "")
        line = (f"stopped {plural(len(stopped), 'node')} of run {run_id} that its keeper ran on after its runner "
                f"died ({shown}); continue with `dagflow run --resume {run_id}`")
        return Report(data, [line])

    def resume(self, run_dir: Path) -> str:
        layout = RunLayout.from_run_dir(run_dir)
        return self.submit(layout.load_plan(), layout.run_dir)  # a detached `dagflow run --resume`

    def wait(self, run_dir: Path) -> None:
        layout = RunLayout.from_run_dir(run_dir)
        time.sleep(0.5)  # the detached runner takes the run's lock as it starts
        while read_status(layout).runner_alive:
            time.sleep(0.5)

    def submit(self, plan: Plan, run_dir: Path) -> str:
        self._check_devices()  # before the detached runner starts: an error here, not in its log
        return LocalEngine.submit(self, plan, run_dir)

    def run(self, plan: Plan | None, run_dir: Path, json_output: bool) -> int | None:
        options = self.run_options(self._reporter(json_output), handle_signals=True)
        options.runs_dir = Path(run_dir).parent
        if plan is None:
            return resume_local(Path(run_dir).name, options).exit_code
        self._check_devices()
        return run_local(plan, options).exit_code

    def _check_devices(self) -> None:
        """--gpus naming a device that is not here is bad input, not a slot to wait for."""
        if self.settings["gpus"] is not None:
            from dagflow.engines.local.devices import check_devices

            check_devices(self.settings["gpus"])

    def submitted(self, run_dir: Path, handle: str) -> Report:
        run_id = Path(run_dir).name
        line = f"started run {run_id} in the background; follow it with `dagflow status {run_id}`"
        return Report({"run_id": run_id, "engine": self.name}, [line])

    def _reporter(self, json_output: bool) -> Reporter:
        hint = "" if self.runs_dir == DEFAULT_RUNS_DIR else f" --runs-dir {self.runs_dir}"
        if json_output:
            return JsonReporter()
        if sys.stdout.isatty():
            from dagflow.run.live_view import RichReporter  # rich is only needed on a terminal

            return RichReporter(runs_dir_hint=hint)
        return PlainReporter(runs_dir_hint=hint)
