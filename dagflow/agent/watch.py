"""`dagflow agent watch`: poll IMDS for a spot interruption notice or a rebalance recommendation and
drain the node's startd when one appears.

A rebalance recommendation (the instance is at elevated risk) gets a graceful drain: no new jobs,
running ones finish. A spot interruption notice (about two minutes left) gets a quick drain: jobs
are vacated now, so they checkpoint and go back to the queue instead of dying with the instance.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from dagflow.agent.imds import Imds, ImdsTimeoutError

log = logging.getLogger("dagflow.agent")

DRAIN_MODES = ("graceful", "quick", "fast")


class Runner(Protocol):
    def __call__(self, argv: Sequence[str]) -> tuple[int, str]: ...


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    try:
        result = subprocess.run(list(argv), capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return 127, str(error)
    return result.returncode, (result.stdout + result.stderr).strip()


@dataclass
class CondorDrainer:
    """Drains this machine's startd with condor_drain (or a peaceful condor_off when it is missing)."""

    machine: str = field(default_factory=socket.getfqdn)
    runner: Runner = run_command
    which: Callable[[str], str | None] = shutil.which

    def drain(self, mode: str, reason: str) -> tuple[bool, str]:
        if self.which("condor_drain"):
            argv = ["condor_drain", f"-{mode}", "-reason", reason, self.machine]
            code, output = self.runner(argv)
            if code != 0 and "already" in output.lower() and mode != "graceful":
                # Escalating a graceful drain: cancel it, then drain again at the faster pace.
                self.runner(["condor_drain", "-cancel", self.machine])
                code, output = self.runner(argv)
        elif self.which("condor_off"):
            argv = ["condor_off", "-peaceful", "-daemon", "startd"]
            code, output = self.runner(argv)
        else:
            return False, "neither condor_drain nor condor_off is installed; nothing drained"
        done = " ".join(argv)
        return code == 0, f"ran `{done}`: " + ("ok" if code == 0 else f"exit {code}: {output[:200]}")


class Drainer(Protocol):
    def drain(self, mode: str, reason: str) -> tuple[bool, str]: ...


@dataclass
class Watcher:
    imds: Imds
    drainer: Drainer
    on_interruption: str = "quick"
    on_rebalance: str = "graceful"
    handled: set[str] = field(default_factory=set)
    drained_mode: str | None = None

    def poll(self) -> list[str]:
        """One look at IMDS; drains at most once per notice. Returns what was done (also logged)."""
        try:
            return self._poll()
        except ImdsTimeoutError as error:  # a slow answer this time: look again next poll
            log.warning("%s", error)
            return []

    def _poll(self) -> list[str]:
        actions = []
        spot = self.imds.spot_notice()
        if spot is not None and f"spot:{spot.action}:{spot.time}" not in self.handled:
            self.handled.add(f"spot:{spot.action}:{spot.time}")
            reason = f"dagflow agent: EC2 spot interruption notice ({spot.action} at {spot.time})"
            actions.append(self._drain(self.on_interruption, reason))
        rebalance = self.imds.rebalance_notice()
        if rebalance is not None and f"rebalance:{rebalance}" not in self.handled:
            self.handled.add(f"rebalance:{rebalance}")
            reason = f"dagflow agent: EC2 rebalance recommendation (notice {rebalance})"
            actions.append(self._drain(self.on_rebalance, reason))
        return actions

    def _drain(self, mode: str, reason: str) -> str:
        if self.drained_mode is not None and DRAIN_MODES.index(mode) <= DRAIN_MODES.index(self.drained_mode):
            return self._note(f"{reason}: already draining ({self.drained_mode})")
        ok, what = self.drainer.drain(mode, reason)
        if ok:
            self.drained_mode = mode
        message = f"{reason}: {what}"
        (log.info if ok else log.error)(message)
        return message

    @staticmethod
    def _note(message: str) -> str:
        log.info(message)
        return message

    def run(
        self,
        interval_s: float = 5.0,
        iterations: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> list[str]:
        done: list[str] = []
        count = 0
        while iterations is None or count < iterations:
            done += self.poll()
            count += 1
            if iterations is None or count < iterations:
                sleep(interval_s)
        return done
