"""The user's index of run directories, so that `dagflow runs`, and status/logs/cancel of a run id, find runs
from any directory: `$XDG_STATE_HOME/dagflow/runs.jsonl` (XDG_STATE_HOME defaults to ~/.local/state).

One JSON line per run directory, appended when the directory is created (RunLayout.create): its id, its
absolute path, its pipeline's name and when it was made. Appends and rewrites hold `runs.lock` (flock), so
two dagflow processes at once never lose a line; a rewrite (dropping runs whose directory is gone, which a
read does) is a write_atomic rename, so a reader sees the old index or the new one. The index is a help,
not state: a run it lacks is still found from its own directory, and one that cannot be written (a
read-only home) costs only that.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from dagflow.files import write_atomic

INDEX_FILE = "runs.jsonl"
LOCK_FILE = "runs.lock"


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    dir: str  # the run directory, absolute
    pipeline: str
    t: float  # when the run directory was made (wall time)

    @property
    def run_dir(self) -> Path:
        return Path(self.dir)


def state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or ""
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "state"  # the spec ignores a relative one
    return root / "dagflow"


def note_run(run_dir: Path, pipeline: str) -> None:
    """Add a run directory to the index; a state dir that cannot be written is passed over."""
    entry = Entry(Path(run_dir).name, str(Path(run_dir).absolute()), pipeline, round(time.time(), 3))
    with contextlib.suppress(OSError), _locked() as index, open(index, "ab") as handle:
        handle.write(_line(entry))
        handle.flush()
        # Durable now, before the run starts: left to the page cache, the run's first journal fsync would
        # wait for it (ext4's ordered mode writes other files' data with a commit).
        os.fsync(handle.fileno())


def indexed_runs() -> list[Entry]:
    """The runs in the index whose directory still holds a run, oldest first (one entry per directory);
    the index is rewritten without the others."""
    try:
        with _locked() as index:
            entries, dropped = _read(index)
            if dropped:
                with contextlib.suppress(OSError):
                    write_atomic(index, b"".join(_line(entry) for entry in entries))
            return entries
    except OSError:
        return []


def _read(index: Path) -> tuple[list[Entry], bool]:
    try:
        data = index.read_bytes()
    except FileNotFoundError:
        return [], False
    by_dir: dict[str, Entry] = {}
    dropped = False
    for raw in data.splitlines():
        try:
            fields = json.loads(raw)
            entry = Entry(str(fields["id"]), str(fields["dir"]), str(fields["pipeline"]), float(fields["t"]))
        except (ValueError, KeyError, TypeError):
            dropped = True  # a torn or foreign line
            continue
        if entry.dir in by_dir:
            dropped = True
        by_dir.pop(entry.dir, None)
        by_dir[entry.dir] = entry
    alive = [entry for entry in by_dir.values() if (entry.run_dir / "plan.json").is_file()]
    return alive, dropped or len(alive) != len(by_dir)


def _line(entry: Entry) -> bytes:
    return (json.dumps(asdict(entry), separators=(",", ":")) + "\n").encode()


@contextlib.contextmanager
def _locked() -> Iterator[Path]:
    directory = state_dir()
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield directory / INDEX_FILE
    finally:
        os.close(fd)
