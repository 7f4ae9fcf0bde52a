"""What tells that a run directory was written: each entry's inode, size and modification time; and making one
read-only (`chmod -R a-w`) for a while."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def entries(run_dir: Path) -> dict[str, tuple[int, int, int]]:
    """Every entry under the run directory, itself included: (inode, size, modification time)."""
    found = [run_dir, *sorted(run_dir.rglob("*"))]
    return {str(path.relative_to(run_dir)): (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            for path in found if (stat := path.lstat())}  # fmt: skip


@contextmanager
def read_only(run_dir: Path) -> Iterator[None]:
    """`chmod -R a-w` the run directory, and give its modes back after."""
    modes = {path: path.lstat().st_mode for path in [run_dir, *run_dir.rglob("*")] if not path.is_symlink()}
    try:
        for path, mode in modes.items():
            path.chmod(mode & ~0o222)
        yield
    finally:
        for path, mode in modes.items():
            path.chmod(mode)


def states(engine: Any, run_dir: Path) -> dict[str, str]:
    """Node name -> state, as the engine reads the run (engines/base.py read_status)."""
    from dagflow.run.layout import RunLayout

    return engine.read_status(RunLayout.from_run_dir(run_dir)).node_states()
