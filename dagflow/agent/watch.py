"""`dagflow agent watch`: poll IMDS for a spot interruption notice or a rebalance recommendation and
drain the node's startd when one appears.

A rebalance recommendation (the instance is at elevated risk) gets a graceful drain: no new jobs,
running ones finish. A spot interruption notice (about two minutes left) gets a quick drain: jobs
are vacated now, so they checkpoint and go back to the queue instead of dying with the instance.

A notice counts as handled only once its drain took: a condor_drain that fails is run again at every
poll until it succeeds, the notice goes away, or the instance does. An IMDS answer the watcher cannot
use is logged, and the next poll looks again.
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

from dagflow.agent.imds import Imds, ImdsError

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


@dataclass(frozen=True, slots=True)
class Notice:
    key: str  # what identifies this notice among the ones seen
    mode: str  # the drain pace it asks for
    reason: str


@dataclass
class Watcher:
    imds: Imds
    drainer: Drainer
    on_interruption: str = "quick"
    on_rebalance: str = "graceful"
    handled: set[str] = field(default_factory=set)
    drained_mode: str | None = None

    def poll(self) -> list[str]:
        """One look at IMDS. A notice is handled once its drain took (or a drain at least as fast had);
        a drain that failed is tried again at the next poll. Returns what was done (also logged)."""
        actions = []
        for look in (self._spot, self._rebalance):
            try:  # whatever IMDS answers, the watcher keeps watching: the next poll looks again
                notice = look()
            except ImdsError as error:
                log.warning("%s", error)
                continue
            if notice is not None and notice.key not in self.handled:
                actions.append(self._drain(notice))
        return actions

    def _spot(self) -> Notice | None:
        spot = self.imds.spot_notice()
        if spot is None:
            return None
        reason = f"dagflow agent: EC2 spot interruption notice ({spot.action} at {spot.time})"
        return Notice(f"spot:{spot.action}:{spot.time}", self.on_interruption, reason)

    def _rebalance(self) -> Notice | None:
        rebalance = self.imds.rebalance_notice()
        if rebalance is None:
            return None
        reason = f"dagflow agent: EC2 rebalance recommendation (notice {rebalance})"
        return Notice(f"rebalance:{rebalance}", self.on_rebalance, reason)

    def _drain(self, notice: Notice) -> str:
        already = self.drained_mode
        if already is not None and DRAIN_MODES.index(notice.mode) <= DRAIN_MODES.index(already):
            self.handled.add(notice.key)
            return self._note(f"{notice.reason}: already draining ({already})")
        ok, what = self.drainer.drain(notice.mode, notice.reason)
        if ok:
            self.drained_mode = notice.mode
            self.handled.add(notice.key)
        message = f"{notice.reason}: {what}" + ("" if ok else "; trying again at the next poll")
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
