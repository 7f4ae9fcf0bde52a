"""What an engine's launch and cancel did, as data (Launched, Cancelled: engines return it, never words), and
what `dagflow submit`, `resubmit` and `cancel` print of it, the same for every engine."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.text import plural


@dataclass(frozen=True, slots=True)
class Launched:
    """What an engine's launch started, as data: the session and reports.py say it."""

    handle: str  # the engine's own name for it: a pid, the scheduler's job ids (comma-separated), a DAGMan job
    facts: dict[str, Any] = field(default_factory=dict)  # what `submit --json` says after run_id and engine
    jobs: tuple[str, ...] = ()  # the scheduler's jobs of this submission (a job array counts once)
    nodes: int | None = None  # how many nodes went to the scheduler as jobs; None: not submitted node by node
    seconds: float = 0.0  # time spent submitting them
    driver: str = ""  # the one job that drives the whole run, as named ("DAGMan job 12.0"); "": none
    target: str = ""  # where it was submitted, as said after "on" (a schedd and its pool)
    rescue: int | None = None  # the rescue DAG it was submitted from
    background: bool = False  # a runner on this machine, detached
    preview: str | None = None  # a dry run: what would be submitted; nothing started
    source: Path | None = None  # the file it submits (or would: a dry run names it)


@dataclass(frozen=True, slots=True)
class Cancelled:
    """What an engine's cancel stopped itself; cancel returns None where what drives the run stops its nodes
    (the session waits for that and shows the run's status)."""

    facts: dict[str, Any] = field(default_factory=dict)  # what `cancel --json` says after run_id and engine
    removed: str = ""  # the job that drove the run, removed, as named ("DAGMan job 12.0")
    stopped: tuple[str, ...] = ()  # else: the nodes it stopped (none: nothing ran)


@dataclass(frozen=True, slots=True)
class Report:
    """What a command prints about an engine's action: one JSON object with --json, else lines."""

    data: dict[str, Any]
    lines: list[str] = field(default_factory=list)  # for stdout
    notes: list[str] = field(default_factory=list)  # for stderr, before the lines
    text: str = ""  # written to stdout as is after the lines (a dry run's submit description)


def submitted_report(run_id: str, engine: str, system: str, launched: Launched) -> Report:
    """What submit and resubmit print once launch returned: where the work went (the scheduler's jobs, the
    job that drives the run), or a dry run's description of what would be submitted."""
    data = {"run_id": run_id, "engine": engine, **launched.facts}
    follow = f"follow it with `dagflow status {run_id}`"
    rescue = f" from rescue DAG {launched.rescue:03d}" if launched.rescue is not None else ""
    if launched.preview is not None:
        source = launched.source
        notes = [f"# dry run: would submit {source}{rescue} to {launched.target}; nothing submitted"]
        if source is not None:
            notes.append(f"# run {run_id}: compiled files in {source.parent}")
        return Report(data, notes=notes, text=launched.preview)
    if launched.driver:
        return Report(data, [
            f"submitted run {run_id}{rescue}: {launched.driver} on {launched.target}",
            f"{follow}; stop it with `dagflow cancel {run_id}`",
        ])  # fmt: skip
    if launched.nodes is not None:
        jobs = f"{launched.nodes} nodes as {len(launched.jobs)} {system} jobs in {launched.seconds} s"
        return Report(data, [f"submitted run {run_id}: {jobs}; {follow}"])
    if launched.background:
        return Report(data, [f"started run {run_id} in the background; {follow}"])
    return Report(data, [f"submitted run {run_id} to {engine}; {follow}"])


def cancelled_report(run_id: str, engine: str, cancelled: Cancelled) -> Report:
    """What cancel prints when the engine stopped the run itself (the job driving it removed, or the nodes
    a dead runner's keeper still ran)."""
    data = {"run_id": run_id, "engine": engine, **cancelled.facts}
    if cancelled.removed:
        return Report(data, [f"removed {cancelled.removed} of run {run_id}; continue with `dagflow resubmit {run_id}`"])
    stopped = cancelled.stopped
    if not stopped:
        return Report(data, [f"run {run_id} is not running: nothing to stop"])
    shown = ", ".join(stopped[:5]) + (", ..." if len(stopped) > 5 else "")
    line = (f"stopped {plural(len(stopped), 'node')} of run {run_id} that its keeper ran on after its runner "
            f"died ({shown}); continue with `dagflow run --resume {run_id}`")  # fmt: skip
    return Report(data, [line])
