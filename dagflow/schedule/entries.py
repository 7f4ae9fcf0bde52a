"""What a pipeline's `schedule:` block asks for: one entry for the whole pipeline, or one per value of
the `per` axis, each with the command that runs it and where its lock and log live."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from dagflow.errors import DagflowError
from dagflow.spec.cron import normalize
from dagflow.spec.load import Spec
from dagflow.text import CONTROL_CHARACTERS

SCHEDULE_DIR = Path(".dagflow") / "schedule"
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Never copied into a crontab or a submit file, even when asked: they belong to the credential chain.
SECRET_VARIABLES = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"})


_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ScheduleError(DagflowError):
    pass


def literal(value: str, what: str) -> str:
    """value, or a ScheduleError: a newline or other control character cannot be written literally
    into a crontab (it would start a line of its own) or a submit file."""
    bad = CONTROL_CHARACTERS.search(value)
    if bad:
        raise ScheduleError(
            f"{what} {value!r} contains the control character {bad.group()!r} at position {bad.start()}; "
            "a schedule cannot carry line breaks or control characters: rename it or leave it out"
        )
    return value


@dataclass(frozen=True, slots=True)
class Entry:
    cron: str  # normalised five fields
    select: tuple[str, str] | None  # (axis, value) for `per` schedules
    pipeline: Path  # absolute
    python: Path  # absolute, not resolved: a venv's python must stay the venv's

    @property
    def name(self) -> str:
        stem = schedule_name(self.pipeline)
        return f"{stem}-{self.select[1]}" if self.select else stem

    @property
    def workdir(self) -> Path:
        return self.pipeline.parent

    @property
    def lock(self) -> Path:
        return self.workdir / SCHEDULE_DIR / f"{self.name}.lock"

    @property
    def log(self) -> Path:
        return self.workdir / SCHEDULE_DIR / f"{self.name}.log"

    def dagflow_args(self) -> list[str]:
        """The dagflow command line (after `python -m dagflow`) that one firing runs."""
        if self.select:
            return ["schedule", "run", str(self.pipeline), "--only", f"{self.select[0]}={self.select[1]}"]
        return ["run", str(self.pipeline)]


def schedule_name(pipeline: Path) -> str:
    """A pipeline's schedule name: its file's stem, or its directory's name for a pipeline.yaml."""
    return pipeline.stem if pipeline.stem != "pipeline" else pipeline.parent.name


def interpreter() -> Path:
    return Path(sys.executable).absolute()


def environment(passed: list[str]) -> dict[str, str]:
    """What cron's nearly empty environment lacks: PATH with this venv first, the venv itself, and the
    variables the user names (from this shell), never credentials."""
    env = {"PATH": f"{interpreter().parent}:{SYSTEM_PATH}"}
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    for name in passed:
        if not _VARIABLE_NAME.fullmatch(name):
            raise ScheduleError(f"--env {name!r}: not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
        if name in SECRET_VARIABLES:
            raise ScheduleError(f"--env {name}: credentials are never written into schedules; "
                                "use a profile (AWS_PROFILE) or an instance role")
        if name not in os.environ:
            raise ScheduleError(f"--env {name}: it is not set in this shell")
        env[name] = literal(os.environ[name], f"--env {name}: its value")
    return env


def entries(spec: Spec) -> list[Entry]:
    schedule = spec.model.schedule
    if schedule is None:
        example = 'schedule: {cron: "0 3 * * *"}'
        raise ScheduleError(f"{spec.file}: the pipeline has no schedule: block (e.g. {example})")
    cron = normalize(schedule.cron)
    pipeline = Path(literal(str(spec.file.absolute()), "the pipeline's path"))
    literal(str(interpreter()), "the Python interpreter's path")
    if schedule.per is None:
        return [Entry(cron, None, pipeline, interpreter())]
    values = spec.model.matrix[schedule.per]
    return [
        Entry(cron, (schedule.per, literal(str(value), f"matrix value of {schedule.per}")), pipeline, interpreter())
        for value in values
    ]
