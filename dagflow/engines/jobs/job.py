"""One attempt of one node as a job executor starts it (Job), what the executor says became of it (JobState),
and the error that fails one attempt (JobError): the data of the job-executor contract (executor.py)."""

from __future__ import annotations

import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dagflow.data import with_import_root
from dagflow.errors import DagflowError
from dagflow.plan import DAGFLOW_LAUNCHER, Plan, Resources, StepInfo
from dagflow.run.journal import RUNNING, JournalState, NodeRecord
from dagflow.run.layout import RunLayout

# A job's state, as check_active says it.
QUEUED = "queued"  # submitted, not started yet
ACTIVE = "running"
ENDED = "ended"  # JobState.rc says how; None: it did not exit by itself (removed, lost) and why says so
UNKNOWN = "unknown"  # the executor holds no job of this key: it was never submitted


class JobError(DagflowError):
    """One job cannot be started as asked: its attempt fails with this message."""


class ExecutorError(DagflowError):
    """The executor failed (its scheduler unreachable, a bug): the driver stops, the jobs run on."""


@dataclass(frozen=True, slots=True)
class Job:
    """One attempt of one node, as an executor starts it."""

    run_id: str
    node: str
    attempt: int
    argv: tuple[str, ...]  # what to run (runtime.python applied; `dagflow` for a node that runs dagflow)
    env: Mapping[str, str]  # the node's environment, dagflow's variables included (not the driver's own)
    workdir: str  # where it runs: the pipeline's directory
    stdout: Path  # where its output goes (the run's logs)
    stderr: Path
    resources: Resources
    step: StepInfo  # step.engine_section(executor name): the executor's own step fields
    blocks: Mapping[str, Mapping[str, Any]]  # the pipeline's engine blocks (Plan.engine_defaults), by engine

    @property
    def key(self) -> str:
        return f"{self.run_id}/{self.node}/{self.attempt}"


@dataclass(frozen=True, slots=True)
class JobState:
    state: str  # QUEUED, ACTIVE, ENDED or UNKNOWN
    rc: int | None = None  # an ended job's exit code (negative: the signal that killed it)
    why: str | None = None  # why an ended job has no exit code ("removed", "held: ..."), or a note


def job_for(plan: Plan, layout: RunLayout, name: str, attempt: int) -> Job:
    """The job of one attempt of one node of the plan."""
    node = plan.nodes[name]
    step = plan.steps[node.step]
    env = dict(node.env)
    env.update(DAGFLOW_RUN_ID=layout.run_id, DAGFLOW_RUN_DIR=str(layout.run_dir), DAGFLOW_NODE=name)
    argv = step.runtime.argv(node.argv)
    if argv and argv[0] == DAGFLOW_LAUNCHER:  # the interpreter running dagflow, which can import this dagflow
        env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
        argv = [sys.executable, "-m", "dagflow", *argv[1:]]
    return Job(
        layout.run_id, name, attempt, tuple(argv), env, plan.workdir, layout.stdout_path(name),
        layout.stderr_path(name), step.resources, step, plan.engine_defaults,
    )  # fmt: skip


def jobs_started(record: NodeRecord | None) -> int:
    """How many jobs the journal shows a node started: its attempts and its restarts from a checkpoint, each a
    job of its own (JournalState counts the restarts apart from the attempts). The next job's attempt is one more."""
    return record.attempts + record.restarts if record is not None else 0


def unfinished_jobs(plan: Plan, layout: RunLayout, journal: JournalState, skip: Collection[str]) -> list[Job]:
    """The jobs an executor may hold of the run's nodes not in skip: the journal's latest one of a node it shows
    running, and every node's next one, which a driver killed before it journaled it may have started."""
    asked = []
    for name in plan.nodes:
        if name in skip:
            continue
        record = journal.nodes.get(name)
        started = jobs_started(record)
        if record is not None and record.state == RUNNING:
            asked.append(job_for(plan, layout, name, started))
        asked.append(job_for(plan, layout, name, started + 1))
    return asked


def known_jobs(states: Mapping[str, JobState], asked: Sequence[Job]) -> dict[str, tuple[Job, JobState]]:
    """Of the jobs asked about, those the executor knows (states: its check_active's answer), by node; of two
    jobs of one node, the later one (a job starts only once the one before it ended)."""
    found: dict[str, tuple[Job, JobState]] = {}
    for job in asked:
        state = states.get(job.key, JobState(UNKNOWN))
        if state.state != UNKNOWN:
            found[job.node] = (job, state)
    return found


class Executor(Protocol):
    """What the scheduler uses of a job executor (executor.py JobExecutor)."""

    system: str
    poll_s: float
    max_active: int
    look_grace_s: float
    settings: dict[str, Any]

    def run_job(self, job: Job) -> str: ...

    def check_active(self, jobs: Sequence[Job]) -> dict[str, JobState]: ...

    def cancel_jobs(self, jobs: Sequence[Job]) -> None: ...
