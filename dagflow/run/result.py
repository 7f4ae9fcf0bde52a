"""What a run gives back once it has ended (RunResult), whichever engine ran it, and the exit codes it
means. The local runner builds one as it finishes; a batch engine's `dagflow run` builds one from the run's
final status (run/follow.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from dagflow.run.journal import NODE_STATES

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

RUN_SUCCEEDED = "succeeded"
RUN_FAILED = "failed"
RUN_INTERRUPTED = "interrupted"


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
    notes: list[str] = field(default_factory=list)  # what the engine adds to the summary (why DAGMan stopped)

    @property
    def exit_code(self) -> int:
        return {RUN_SUCCEEDED: EXIT_OK, RUN_INTERRUPTED: EXIT_INTERRUPTED}.get(self.state, EXIT_FAILED)

    @property
    def ok(self) -> bool:
        return self.state == RUN_SUCCEEDED

    def counts(self) -> dict[str, int]:
        counted = Counter(self.states.values())
        ordered = {state: counted[state] for state in NODE_STATES if counted[state]}
        ordered.update((state, count) for state, count in counted.items() if state not in ordered)
        return ordered
