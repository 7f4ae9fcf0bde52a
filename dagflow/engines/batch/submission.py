"""Submitting a plan's units to a batch scheduler in dependency order, for Slurm and Grid Engine.

Each engine says how one unit is submitted (its options and dependency syntax), how a node is named in a
child's dependency, and how submitted jobs are withdrawn; the order, the parallel submission of one
step's units, the job records and the withdrawal of a half-done submission are the same for both.
"""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from pathlib import Path

from dagflow.engines.batch.records import BatchRecords, JobRecord
from dagflow.engines.batch.script import KILL_GRACE_S, SINGLE
from dagflow.engines.batch.units import Unit
from dagflow.errors import DagflowError
from dagflow.plan import Plan, StepInfo
from dagflow.spec import attributes
from dagflow.spec.attributes import attribute_name
from dagflow.text import CONTROL_CHARACTERS

PARALLEL_SUBMITS = 8  # each submit is one process and one scheduler round trip per job


class OptionPathError(DagflowError):
    """A path a scheduler option would read as something else (exit code 2)."""


def option_path(path: Path, option: str, scheduler: str, refused: Mapping[str, str]) -> str:
    """path as the value of a scheduler option, or OptionPathError when the scheduler would not take it
    literally: a control character anywhere (it cannot stay on one line), or one of the option's own
    syntax characters (refused: character -> what the scheduler makes of it)."""
    text = str(path)
    found = [(text.index(char), char, why) for char, why in refused.items() if char in text]
    control = CONTROL_CHARACTERS.search(text)
    if control:
        found.append((control.start(), control.group(), "a line break or other control character"))
    if not found:
        return text
    position, char, why = min(found)
    raise OptionPathError(
        f"{option} {text!r}: {scheduler} cannot take {char!r} (position {position}) in this path: {why}; "
        "move the pipeline, or the runs directory (--runs-dir), to a path without it"
    )


# The step's custom attributes: the condor engine's `classads` step field (its section of the plan step),
# which batch jobs publish too, as HTCondor jobs carry them.
CUSTOM_ATTRIBUTES = ("condor", "classads")


def job_attributes(plan: Plan, unit: Unit, with_node: bool) -> dict[str, object]:
    """The Dagflow attributes of a unit's job (as HTCondor jobs carry them); a single node's job also
    carries its matrix values (and, with_node, its name)."""
    step = plan.steps[unit.step]
    attrs: dict[str, object] = {
        attributes.PIPELINE: plan.pipeline,
        attributes.RUN_ID: plan.run_id,
        attributes.STEP: step.name,
        attributes.KIND: step.kind,
    }
    if not unit.is_array:
        node = plan.nodes[unit.tasks[SINGLE]]
        if with_node:
            attrs[attributes.NODE] = node.name
        for axis, value in node.coords.items():
            attrs[attribute_name(axis)] = value
        if node.trial is not None:
            attrs[attributes.TRIAL] = node.trial
    attrs.update(step.engine_section(CUSTOM_ATTRIBUTES[0]).get(CUSTOM_ATTRIBUTES[1], {}))
    return attrs


def time_limit_s(step: StepInfo) -> int | None:
    """A job's time limit, a backstop above the node wrapper's own per-attempt timeouts: every attempt, its
    kill grace, and a minute; None for a step without a timeout."""
    if not step.timeout_s:
        return None
    return (step.retries + 1) * (step.timeout_s + KILL_GRACE_S) + 60


class UnitSubmission:
    """Submits units in order, resolving each one's dependencies to the jobs already submitted."""

    def __init__(self, plan: Plan, run_dir: Path, records: BatchRecords, sub: int) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.records = records
        self.sub = sub
        self.unit_jobs: list[str | None] = []
        self.node_refs: dict[str, str] = {}  # node -> how a child's dependency names its job
        self.submitted: list[JobRecord] = []

    def run(self, units: list[Unit]) -> list[JobRecord]:
        self.unit_jobs = [None] * len(units)
        try:
            # Units of one step never depend on each other, so a step's units go out in parallel.
            position = 0
            for _, group in groupby(units, key=lambda unit: unit.step):
                batch = list(group)
                indices = range(position, position + len(batch))
                position += len(batch)
                if len(batch) == 1:
                    jobs = [self._submit_one(indices[0], batch[0])]
                else:
                    with ThreadPoolExecutor(PARALLEL_SUBMITS) as pool:
                        jobs = list(pool.map(self._submit_one, indices, batch))
                done = []
                for index, unit, job in zip(indices, batch, jobs, strict=True):
                    self.unit_jobs[index] = job
                    record = JobRecord(self.sub, job, unit.name, unit.tasks)
                    done.append(record)
                    for task, node in unit.tasks.items():
                        self.node_refs[node] = self._node_ref(record, task)
                self.records.append(done)
                self.submitted.extend(done)
        except DagflowError:
            jobs = [job for job in self.unit_jobs if job is not None]
            if jobs:  # a submission that failed half-way: withdraw what it had submitted, so no partial DAG runs
                self._withdraw(jobs)
            raise
        return self.submitted

    def _submit_one(self, index: int, unit: Unit) -> str:
        raise NotImplementedError

    def _node_ref(self, record: JobRecord, task: int) -> str:
        raise NotImplementedError

    def _withdraw(self, jobs: list[str]) -> None:
        raise NotImplementedError
