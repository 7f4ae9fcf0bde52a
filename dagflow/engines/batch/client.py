"""Running a batch scheduler's client commands (sbatch, qsub, ...): a missing command, one that does not
answer in time, or a failure that says the scheduler was not reached becomes the engine's unreachable
error (exit code 3) naming what was tried; any other failure its error. Never a traceback."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dagflow.errors import DagflowError

TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class SchedulerClient:
    title: str  # the scheduler, as in "no Slurm reachable"
    where: Callable[[], str]  # what the commands were pointed at (the scheduler's environment), for errors
    unreachable: re.Pattern[str]  # in a failure's message: the scheduler was not reached
    unreachable_error: type[DagflowError]
    error: type[DagflowError]  # the scheduler answered, but refused
    stdout_in_errors: bool = False  # some schedulers say why they refused on stdout

    def run(self, argv: Sequence[str], input_text: str | None = None, timeout_s: float = TIMEOUT_S) -> str:
        """Run a client command and return its stdout."""
        if shutil.which(argv[0]) is None:
            raise self._unreachable(f"`{argv[0]}` is not on PATH (tried {self.where()})")
        try:
            done = subprocess.run(
                list(argv), input=input_text, capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired:
            raise self._unreachable(f"`{argv[0]}` did not answer in {timeout_s:.0f} s (tried {self.where()})") from None
        if done.returncode != 0:
            said = done.stderr + " " + done.stdout if self.stdout_in_errors else done.stderr
            message = " ".join(said.split()) or f"exit status {done.returncode}"
            if self.unreachable.search(message):
                raise self._unreachable(f"`{argv[0]}` failed ({message}; tried {self.where()})")
            raise self.error(f"{argv[0]} failed: {message}")
        return done.stdout

    def _unreachable(self, what: str) -> DagflowError:
        return self.unreachable_error(f"no {self.title} reachable: {what}")
