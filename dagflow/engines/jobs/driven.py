"""The engine contract of an engine whose runs a driver process on this machine drives: the local runner, or a
job executor's scheduler (executor.py). Every such engine answers it alike, here, once:

- `launch` starts a detached `dagflow run --resume` (start_driver), `wait` waits for it to let go of the run;
- `live` and `read_status`: a driver that holds the run's lock drives it (run/live_runs.py `driven`); a run
  whose driver died is live while what it left (`left_behind`: nodes that run on, or ended with a result the
  journal lacks) is, and its status shows them as they are now;
- `cancel` signals the driver, or, with none, stops what it left holding the run's lock (run/lock.py
  `stop_driven`, which also keeps two cancels from fighting).

An engine says what it left behind and how to stop it: the local engine from its keeper's records, a job
executor by asking its executor about the jobs by key.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from dagflow.data import with_import_root
from dagflow.engines.base import EngineBase, EngineOption
from dagflow.run.journal import ends_with_finish
from dagflow.run.layout import RunLayout
from dagflow.run.live_runs import Live, driven
from dagflow.run.lock import is_locked, stop_driven
from dagflow.run.reports import Cancelled
from dagflow.run.status import RunStatus, read_status


class DrivenEngine(EngineBase):
    """The contract's live, status, wait and cancel for an engine whose driver runs here."""

    driver_word: ClassVar[str] = "driver"  # what `dagflow status` and the live-run rule call the driver
    left_holder: ClassVar[str] = "this machine"  # what runs the nodes a dead driver left ("its keeper")

    def left_behind(self, layout: RunLayout) -> dict[str, int | None]:
        """For a run whose driver died: its nodes that run on (None) and those that ended with a result the
        journal lacks (the exit code; -1 without one)."""
        raise NotImplementedError

    def stop_left(self, layout: RunLayout) -> list[str]:
        """Stop what a dead driver left running and journal it interrupted (the caller holds the run's lock);
        the nodes stopped."""
        raise NotImplementedError

    def stop_driver(self, layout: RunLayout, pid: int) -> None:
        """Ask the live driver (pid) to stop: it stops its nodes and journals them."""
        os.kill(pid, signal.SIGTERM)

    def wait(self, run_dir: Path) -> None:
        wait_for_driver(RunLayout.from_run_dir(run_dir))

    def read_status(self, layout: RunLayout) -> RunStatus:
        """The run directory's status; a run whose driver died shows what it left as it is now."""
        status = read_status(layout)
        if not status.runner_alive and not status.journal.finished and status.journal.runners:
            status.left_behind(self.left_behind(layout), self.system or self.left_holder)
        return status

    def live(self, layout: RunLayout) -> Live | None:
        if ends_with_finish(layout.journal_path):
            return None
        if (live := driven(layout, self.driver_word)) is not None:
            return live
        left = self.left_behind(layout)
        if not left:
            return None
        running = frozenset(name for name, rc in left.items() if rc is None)
        return Live(running, frozenset(left) - running)

    def cancel(self, run_dir: Path) -> Cancelled | None:
        """Signal the run's driver (it stops the nodes and journals them: None); with none (it was killed),
        stop what it left running and journal it interrupted. A result that ended unrecorded is left for a
        resume to take."""
        layout = RunLayout.from_run_dir(run_dir)
        stopped = stop_driven(
            layout.lock_path, lambda: self.stop_left(layout), lambda pid: self.stop_driver(layout, pid)
        )
        return None if stopped is None else Cancelled({"stopped": stopped}, stopped=tuple(stopped))


def start_driver(layout: RunLayout, options: Sequence[EngineOption], settings: Mapping[str, object]) -> int:
    """Start a detached `dagflow run --resume` of the run with these settings (each option that is not its
    default, as its flag); its pid, also written to the run's runner.pid."""
    argv = [sys.executable, "-m", "dagflow", "run", "--resume", layout.run_id, "--json"]
    argv += ["--runs-dir", str(layout.runs_dir)]
    for option in options:
        value = settings.get(option.name, option.default)
        if value == option.default or value is None:
            continue
        flag = option.flags[0]
        if option.type is bool:
            argv.append(flag)
        elif option.type is list:
            for item in value:  # type: ignore[attr-defined]
                argv += [flag, str(item)]
        else:
            argv += [flag, str(value)]
    env = dict(os.environ)
    env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
    with open(layout.runner_log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env)
    layout.runner_pid_path.write_text(f"{proc.pid}\n")
    return proc.pid


def wait_for_driver(layout: RunLayout) -> None:
    """Block until the run's driver (a detached one just started included) has ended."""
    time.sleep(0.5)  # a detached driver takes the run's lock as it starts
    while is_locked(layout.lock_path):
        time.sleep(0.5)
