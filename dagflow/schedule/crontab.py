"""The user's crontab, through the real `crontab` command: a marked block per pipeline.

    # BEGIN dagflow /abs/path/pipeline.yaml
    0 3 * * * cd ... && ... flock -n LOCK PYTHON -m dagflow run PIPELINE [RUN FLAGS] >> LOG 2>&1
    # END dagflow /abs/path/pipeline.yaml

Installing again replaces the block; removing deletes it; every other line is left as it was.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

from dagflow.schedule.entries import Entry, ScheduleError, literal

BEGIN, END = "# BEGIN dagflow ", "# END dagflow "


def crontab_binary() -> str:
    found = shutil.which("crontab")
    if found is None:
        raise ScheduleError("the crontab command is not installed (Debian/Ubuntu: apt-get install cron)")
    return found


def available() -> bool:
    return shutil.which("crontab") is not None


def read_crontab() -> str:
    proc = subprocess.run([crontab_binary(), "-l"], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        if "no crontab" in proc.stderr.lower():
            return ""
        raise ScheduleError(f"crontab -l failed: {proc.stderr.strip()}")
    return proc.stdout


def write_crontab(text: str) -> None:
    proc = subprocess.run([crontab_binary(), "-"], input=text, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ScheduleError(f"crontab refused the new table: {proc.stderr.strip()}")


def cron_escape(command: str) -> str:
    """cron turns an unescaped % in the command into a newline."""
    return command.replace("%", "\\%")


def cron_line(entry: Entry, env: dict[str, str]) -> str:
    """One crontab line; refuses (ScheduleError) any value a single line cannot hold literally."""
    for what, value in (("pipeline path", entry.pipeline), ("interpreter path", entry.python)):
        literal(str(value), what)
    for name, value in env.items():
        literal(value, f"environment variable {name}: its value")
    assignments = " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    argv = ["flock", "-n", str(entry.lock), str(entry.python), "-m", "dagflow", *entry.dagflow_args()]
    command = (
        f"cd {shlex.quote(str(entry.workdir))} && {assignments} {shlex.join(argv)}"
        f" >> {shlex.quote(str(entry.log))} 2>&1"
    )
    return f"{entry.cron} {cron_escape(command)}"


def block(entries: list[Entry], env: dict[str, str]) -> list[str]:
    """The pipeline's marked block of crontab lines: what `install` writes and `install --print` shows."""
    pipeline = entries[0].pipeline
    literal(str(pipeline), "pipeline path")
    lines = [literal(cron_line(entry, env), "crontab line") for entry in entries]
    return [f"{BEGIN}{pipeline}", *lines, f"{END}{pipeline}"]


def split_block(text: str, pipeline: Path) -> tuple[list[str], list[str] | None]:
    """(the crontab's lines without this pipeline's block, the block's lines or None)."""
    kept: list[str] = []
    found: list[str] | None = None
    inside: list[str] | None = None
    for line in text.splitlines():
        if line == f"{BEGIN}{pipeline}":
            inside = []
        elif inside is not None and line == f"{END}{pipeline}":
            found, inside = inside, None
        elif inside is not None:
            inside.append(line)
        else:
            kept.append(line)
    if inside is not None:  # an unterminated block: keep its lines rather than lose the user's text
        kept.extend([f"{BEGIN}{pipeline}", *inside])
    return kept, found


def installed_blocks(text: str) -> dict[str, list[str]]:
    """Every dagflow block in a crontab: pipeline path -> its lines."""
    blocks: dict[str, list[str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith(BEGIN):
            current = line[len(BEGIN) :]
            blocks[current] = []
        elif current is not None and line == f"{END}{current}":
            current = None
        elif current is not None:
            blocks[current].append(line)
    return blocks


def install(pipeline: Path, lines: list[str]) -> bool:
    """Write this pipeline's block (lines, from block()), replacing an installed one; True when one was."""
    kept, old = split_block(read_crontab(), pipeline)
    while kept and not kept[-1].strip():
        kept.pop()
    new = [*kept, *([""] if kept else []), *lines]
    write_crontab("\n".join(new) + "\n")
    return old is not None


def remove(pipeline: Path) -> bool:
    kept, old = split_block(read_crontab(), pipeline)
    if old is None:
        return False
    write_crontab("\n".join(kept) + "\n" if kept else "")
    return True
