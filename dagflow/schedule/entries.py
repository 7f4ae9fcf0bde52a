"""What a pipeline's `schedule:` block asks for: one entry for the whole pipeline, or one per value of
the `per` axis, each with the command that runs it and where its lock and log live.

A `per` schedule's lines are spread over the hour instead of all firing at once: where the cron minute is
a single number M, each line fires at M + (a number from the sha256 of the pipeline's name and the line's
value) modulo 60 - M, so never before M nor past the hour, and always at the same minute for that value.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dagflow.errors import DagflowError, closest
from dagflow.plan.overrides import check_overrides, parse_overrides
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
    label: str  # the pipeline's name: what its logs are named after
    run_flags: tuple[str, ...] = ()  # what each firing passes on to the run (RunFlags)

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
    def log_stem(self) -> Path:
        """Where its logs go, less the suffix: named after the pipeline (and the line's value)."""
        return self.workdir / SCHEDULE_DIR / (f"{self.label}-{self.select[1]}" if self.select else self.label)

    @property
    def log(self) -> Path:
        return self.log_stem.with_name(f"{self.log_stem.name}.log")

    def dagflow_args(self) -> list[str]:
        """The dagflow command line (after `python -m dagflow`) that one firing runs."""
        if self.select:
            only = f"{self.select[0]}={self.select[1]}"
            return ["schedule", "run", str(self.pipeline), "--only", only, *self.run_flags]
        return ["run", str(self.pipeline), *self.run_flags]


@dataclass(frozen=True, slots=True)
class RunFlags:
    """The run flags a schedule passes on to each firing: the ones that make sense unattended."""

    only: Sequence[str] = ()
    sets: Sequence[str] = ()
    force: Sequence[str] = ()  # step names

    def checked(self, spec: Spec, condor: bool) -> tuple[str, ...]:
        """The flags as words of the firing's command line; ScheduleError (or OverrideError) for one that
        does not fit the pipeline, so a schedule never fires a run that would refuse them."""
        check_overrides(spec, parse_overrides(self.only, self.sets))
        per = spec.model.schedule.per if spec.model.schedule else None
        for item in self.only:
            if per is not None and item.split("=", 1)[0] == per:
                raise ScheduleError(f"--only {item}: schedule.per already gives each line its own {per}")
        if self.force and condor:
            raise ScheduleError("--force is the local engine's: `dagflow submit --engine condor` does not take it")
        steps = list(spec.model.steps)
        for name in self.force:
            if name not in steps:
                hint = closest(name, steps)
                raise ScheduleError(f"--force {name!r}: not a step of {spec.file} (its steps: {', '.join(steps)})"
                                    + (f"; {hint}" if hint else ""))
        words = [
            *(word for item in self.only for word in ("--only", item)),
            *(word for item in self.sets for word in ("--set", item)),
            *(word for name in self.force for word in ("--force", name)),
        ]
        return tuple(literal(word, "run flag") for word in words)


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


def spread(cron: str, pipeline_name: str, value: str) -> str:
    """cron with its minute moved later in the hour for this (pipeline, value), when it is a single number
    (the module docstring says how); any other minute field is left as it is."""
    minute, rest = cron.split(" ", 1)
    if not minute.isdigit():
        return cron
    digest = hashlib.sha256(f"{pipeline_name}\0{value}".encode()).digest()
    start = int(minute)
    return f"{start + int.from_bytes(digest[:8], 'big') % (60 - start)} {rest}"


def entries(spec: Spec, flags: RunFlags | None = None, condor: bool = False) -> list[Entry]:
    schedule = spec.model.schedule
    if schedule is None:
        example = 'schedule: {cron: "0 3 * * *"}'
        raise ScheduleError(f"{spec.file}: the pipeline has no schedule: block (e.g. {example})")
    cron = normalize(schedule.cron)
    pipeline = Path(literal(str(spec.file.absolute()), "the pipeline's path"))
    literal(str(interpreter()), "the Python interpreter's path")
    words = (flags or RunFlags()).checked(spec, condor)
    label = spec.model.name
    if schedule.per is None:
        return [Entry(cron, None, pipeline, interpreter(), label, words)]
    values = [literal(str(value), f"matrix value of {schedule.per}") for value in spec.model.matrix[schedule.per]]
    return [
        Entry(spread(cron, label, value), (schedule.per, value), pipeline, interpreter(), label, words)
        for value in values
    ]
