"""Submitting a plan's units to a batch scheduler in dependency order, for Slurm and Grid Engine.

Each engine says how one unit is submitted (its options and dependency syntax), how a node is named in a
child's dependency, and how submitted jobs are withdrawn; the order, the parallel submission of one
step's units, the job records and the withdrawal of a half-done submission are the same for both.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from pathlib import Path

from dagflow.engines.slurm.records import JobRecord, SlurmRecords
from dagflow.engines.slurm.units import Unit
from dagflow.errors import DagflowError
from dagflow.plan import Plan

PARALLEL_SUBMITS = 8  # each submit is one process and one scheduler round trip per job


class UnitSubmission:
    """Submits units in order, resolving each one's dependencies to the jobs already submitted."""

    def __init__(self, plan: Plan, run_dir: Path, records: SlurmRecords, sub: int) -> None:
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
