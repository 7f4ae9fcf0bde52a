"""What a caller gives a local run (RunOptions) and gets back (RunResult)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dagflow.run.journal import NODE_STATES
from dagflow.run.layout import DEFAULT_RUNS_DIR

if TYPE_CHECKING:
    from dagflow.engines.local.reporting import Reporter

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
RUN_INTERRUPTED = "interrupted"


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
    engine: str = "local"  # the engine recorded in the runs it makes: this one, or an engine built on it


@dataclass(frozen=True, slots=True)
class Failure:
    node: str
    why: str
    attempts: int
    log: Path | None  # its stderr log, else its stdout log; None if it printed nothing

    def log_hint(self) -> str:
        return f"see {self.log}" if self.log else "it printed nothing"


@dataclass(slots=True)
class RunResult:
    run_id: str
    run_dir: Path
    state: str  # succeeded | failed | interrupted
    states: dict[str, str]  # every node's final state
    duration_s: float
    failures: list[Failure] = field(default_factory=list)
    resumed_done: int = 0  # nodes already finished by an earlier runner of this run

    @property
    def exit_code(self) -> int:
        return {RUN_SUCCEEDED: EXIT_OK, RUN_INTERRUPTED: EXIT_INTERRUPTED}.get(self.state, EXIT_FAILED)

    @property
    def ok(self) -> bool:
        return self.state == RUN_SUCCEEDED

    def counts(self) -> dict[str, int]:
        counted = Counter(self.states.values())
        return {state: counted[state] for state in NODE_STATES if counted[state]}
