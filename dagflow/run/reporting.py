"""Progress reporters, for every engine: the local runner calls one as its nodes move, and a batch engine's
`dagflow run` feeds one from what it observes while it waits (run/follow.py). Plain lines or JSON events
here, the live terminal view in live_view.py."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from dagflow.plan import Plan
from dagflow.run.promotions import promotion_lines, promotion_records
from dagflow.run.result import RUN_INTERRUPTED, RUN_SUCCEEDED, RunResult
from dagflow.text import inert, plural


@dataclass(slots=True)
class RunInfo:
    plan: Plan
    run_id: str
    run_dir: Path
    jobs: int | None  # the local runner's slots; None where a scheduler places the nodes (see where)
    resumed: bool
    done: set[str] = field(default_factory=set)  # finished by an earlier runner (or submission) of this run
    where: str = ""  # where the nodes run, when not in slots on this machine: "HTCondor (DAGMan job 12.0)"

    def placement(self) -> str:
        return f"{self.jobs} slots" if self.jobs is not None else f"on {self.where or 'a batch system'}"


class Reporter:
    """Does nothing; subclasses override what they show. tick() is called about every tick_interval
    seconds while nodes run, when tick_interval is set; flush() once per turn of the runner's loop (a batch
    engine's: once per look at the run), before it waits, so a reporter may hold what it has to say until
    then (a big run of short nodes finishes many nodes a turn: one write for all of them, not one each)."""

    tick_interval: float | None = None

    def run_started(self, info: RunInfo) -> None: ...

    def node_started(self, name: str, attempt: int, gpus: tuple[str, ...]) -> None: ...

    def node_finished(
        self, name: str, state: str, attempt: int, rc: int | None, why: str | None, duration: float
    ) -> None:
        """state is succeeded, failed, interrupted, retry or checkpointed (it will start again)."""

    def node_held(self, name: str, why: str | None) -> None:
        """Its job was put on hold by the batch system (only batch engines have holds); it starts (again)
        or finishes later."""

    def node_cached(self, name: str) -> None: ...

    def nodes_blocked(self, names: list[str], by: str) -> None: ...

    def tick(self) -> None: ...

    def flush(self) -> None: ...

    def stop(self) -> None:
        """The caller stops following the run before it ended (Ctrl-C): leave the terminal clean."""
        self.flush()

    def run_finished(self, result: RunResult) -> None: ...


def summary_lines(result: RunResult, runs_dir_hint: str = "") -> list[str]:
    counts = result.counts()
    parts = [f"{count} {state.replace('_', '-')}" for state, count in counts.items()]
    lines = [f"run {result.run_id} {result.state} in {result.duration_s:.1f}s: {', '.join(parts) or 'no nodes'}"]
    lines.extend(f"  {note}" for note in result.notes)
    if result.resumed_done:
        lines.append(f"  {plural(result.resumed_done, 'node')} had finished before this resume: not rerun")
    if counts.get("cached"):
        lines.append(f"  skipped {plural(counts['cached'], 'cached node')} (unchanged since last success)")
    for failure in result.failures[:20]:
        tries = f" after {failure.attempts} attempts" if failure.attempts > 1 else ""
        lines.append(f"  failed {failure.node}: {failure.why}{tries}; {failure.log_hint()}")
    if len(result.failures) > 20:
        lines.append(f"  ... and {plural(len(result.failures) - 20, 'more failed node')}")
    if counts.get("upstream_failed"):
        lines.append(f"  {plural(counts['upstream_failed'], 'node')} did not run: a node upstream failed")
    lines.extend(promotion_lines(promotion_records(result.run_dir, result.states)))
    if result.state != RUN_SUCCEEDED:
        lines.append(f"resume with: dagflow run --resume {result.run_id}{runs_dir_hint}")
    return [inert(line) for line in lines]  # a failure's why can quote what a job wrote


class PlainReporter(Reporter):
    """One line per finished node, for logs and pipes (with show_starts, one per start too)."""

    def __init__(self, stream: TextIO | None = None, runs_dir_hint: str = "", show_starts: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.runs_dir_hint = runs_dir_hint
        self.show_starts = show_starts
        self.total = 0
        self.finished = 0
        self._lines: list[str] = []
        self._clock = (-1, "")  # (unix second, its HH:MM:SS)

    def _print(self, text: str) -> None:
        """A line with what a job wrote in it (a hold reason, a why) shown inert (text.py)."""
        now = int(time.time())
        if now != self._clock[0]:
            self._clock = (now, time.strftime("%H:%M:%S", time.localtime(now)))
        self._lines.append(f"{self._clock[1]} {inert(text)}\n")

    def flush(self) -> None:
        if self._lines:
            self.stream.write("".join(self._lines))
            self._lines.clear()
        self.stream.flush()

    def run_started(self, info: RunInfo) -> None:
        self.total = len(info.plan.nodes)
        self.finished = len(info.done)
        verb = "resuming" if info.resumed else "starting"
        extra = f", {len(info.done)} already done" if info.done else ""
        where = f", {info.placement()}" if info.jobs is not None else f" {info.placement()}"
        self._print(f"{verb} run {info.run_id}: {self.total} nodes{where}{extra} (logs in {info.run_dir})")
        self.flush()

    def node_started(self, name: str, attempt: int, gpus: tuple[str, ...]) -> None:
        if self.show_starts:
            tries = f" attempt {attempt}" if attempt > 1 else ""
            self._print(f"[{self.finished}/{self.total}] started {name}{tries}")

    def node_finished(
        self, name: str, state: str, attempt: int, rc: int | None, why: str | None, duration: float
    ) -> None:
        if state not in ("retry", "checkpointed"):
            self.finished += 1
        detail = f" ({why})" if why and state != "succeeded" else ""
        tries = f" attempt {attempt}" if attempt > 1 or state == "retry" else ""
        label = {"retry": "retrying", "checkpointed": "restarting from its checkpoint:"}.get(state, state)
        self._print(f"[{self.finished}/{self.total}] {label} {name}{tries} {duration:.1f}s{detail}")

    def node_held(self, name: str, why: str | None) -> None:
        detail = f" ({why.removeprefix('held: ')})" if why else ""
        self._print(f"[{self.finished}/{self.total}] held {name}{detail}")

    def node_cached(self, name: str) -> None:
        self.finished += 1
        self._print(f"[{self.finished}/{self.total}] cached {name}")

    def nodes_blocked(self, names: list[str], by: str) -> None:
        self.finished += len(names)
        self._print(f"[{self.finished}/{self.total}] {plural(len(names), 'node')} will not run: {by} failed")

    def run_finished(self, result: RunResult) -> None:
        if result.state == RUN_INTERRUPTED:
            self._print("interrupted")
        self._lines.extend(f"{line}\n" for line in summary_lines(result, self.runs_dir_hint))
        self.flush()


class JsonReporter(Reporter):
    """Newline-delimited JSON events on stdout, one object per event, each with "event" and "t"."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self._lines: list[str] = []

    def _emit(self, event: str, **fields: Any) -> None:
        fields["event"] = event
        fields["t"] = round(time.time(), 3)
        self._lines.append(json.dumps(fields, separators=(",", ":")) + "\n")

    def flush(self) -> None:  # each turn of the runner: a consumer follows the run as it goes
        if self._lines:
            self.stream.write("".join(self._lines))
            self._lines.clear()
        self.stream.flush()

    def run_started(self, info: RunInfo) -> None:
        self._emit(
            "run_started",
            run_id=info.run_id,
            run_dir=str(info.run_dir),
            pipeline=info.plan.pipeline,
            nodes=len(info.plan.nodes),
            jobs=info.jobs,
            resumed=info.resumed,
            already_done=len(info.done),
        )
        self.flush()

    def node_started(self, name: str, attempt: int, gpus: tuple[str, ...]) -> None:
        self._emit("node_started", node=name, attempt=attempt, gpus=list(gpus))

    def node_finished(
        self, name: str, state: str, attempt: int, rc: int | None, why: str | None, duration: float
    ) -> None:
        self._emit(
            "node_finished",
            node=name,
            state=state,
            attempt=attempt,
            exit_code=rc,
            why=why,
            duration_s=round(duration, 3),
        )

    def node_held(self, name: str, why: str | None) -> None:
        self._emit("node_held", node=name, why=why)

    def node_cached(self, name: str) -> None:
        self._emit("node_cached", node=name)

    def nodes_blocked(self, names: list[str], by: str) -> None:
        for name in names:
            self._emit("node_upstream_failed", node=name, by=by)

    def run_finished(self, result: RunResult) -> None:
        self._emit(
            "run_finished",
            run_id=result.run_id,
            state=result.state,
            exit_code=result.exit_code,
            counts=result.counts(),
            duration_s=round(result.duration_s, 3),
            failed=[{"node": f.node, "why": f.why, "log": str(f.log) if f.log else None} for f in result.failures],
            promotions=promotion_records(result.run_dir, result.states),
        )
        self.flush()
