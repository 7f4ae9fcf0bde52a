"""What a caller gives a local run (RunOptions; what it gets back is result.py's RunResult)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dagflow.run.layout import DEFAULT_RUNS_DIR

if TYPE_CHECKING:
    from dagflow.run.reporting import Reporter


@dataclass(slots=True)
class RunOptions:
    runs_dir: Path = DEFAULT_RUNS_DIR
    jobs: int | None = None  # concurrent nodes; None: the cpu count
    gpus: str | None = None  # "0,1": use these devices; None: ask nvidia-smi if a node needs a GPU
    force: tuple[str, ...] = ()  # step or node names to run even if cached (their descendants too)
    use_cache: bool = True
    cache_dir: Path | None = None  # None: <runs_dir>/../cache
    kill_grace_s: float = 10.0  # SIGTERM to SIGKILL, for timeouts, interrupts and orphans
    reporter: Reporter | None = None
    # SIGINT/SIGTERM stop the run cleanly; only possible when run() is called on the main thread.
    handle_signals: bool = False
    # A runner on a thread of a bigger process (a search's trials): `dagflow cancel` asks it through its stop
    # channel (stop_channel.py), since a signal would stop the whole process.
    stop_channel: bool = False
    engine: str = "local"  # the engine recorded in the runs it makes: this one, or an engine built on it
