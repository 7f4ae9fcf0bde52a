"""Submitting a plan's unfinished nodes as sbatch jobs, and recording their job ids in the run directory."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path

from dagflow.engines.batch.submission import UnitSubmission, job_attributes, option_path, time_limit_s
from dagflow.engines.batch.units import Unit, plan_units
from dagflow.engines.slurm import commands
from dagflow.engines.slurm.records import JobRecord, SlurmRecords
from dagflow.engines.slurm.script import render_script
from dagflow.errors import DagflowError
from dagflow.plan import Plan, StepInfo


def array_spec(tasks: Iterable[int]) -> str:
    """[0, 1, 2, 3, 7] -> "0-3,7"."""
    parts = []
    ordered = sorted(tasks)
    for _, run in groupby(enumerate(ordered), key=lambda pair: pair[1] - pair[0]):
        ids = [task for _, task in run]
        parts.append(str(ids[0]) if len(ids) == 1 else f"{ids[0]}-{ids[-1]}")
    return ",".join(parts)


def time_limit_minutes(step: StepInfo) -> int | None:
    """The job's `--time` (see submission.time_limit_s), in whole minutes."""
    seconds = time_limit_s(step)
    return None if seconds is None else math.ceil(seconds / 60)


def comment(plan: Plan, unit: Unit) -> str:
    """The Dagflow attributes of a job (as HTCondor jobs carry them), as compact JSON."""
    return json.dumps(job_attributes(plan, unit, with_node=False), separators=(",", ":"))


def filename_pattern(path: Path, option: str) -> str:
    """A path as sbatch's --output/--error read it: `%` starts a replacement (`%j`: the job id), so it
    is doubled; a backslash anywhere turns replacements off and is dropped, so it is refused."""
    text = option_path(path, option, "Slurm", {"\\": "Slurm drops backslashes from output file names"})
    return text.replace("%", "%%")


def sbatch_options(plan: Plan, unit: Unit, records: SlurmRecords) -> list[str]:
    step = plan.steps[unit.step]
    res = step.resources
    log = filename_pattern(records.wrapper_log, "--output")
    options = [
        f"--job-name={unit.name}:{plan.run_id}",
        f"--comment={comment(plan, unit)}",
        f"--cpus-per-task={res.cpus}",
        f"--mem={res.memory_mb}M",
        f"--output={log}",
        f"--error={log}",
        "--open-mode=append",
        "--no-requeue",
        # The same as the cluster's DependencyParameters=kill_invalid_depend, for clusters without it:
        # a job after a failed parent is cancelled instead of pending forever.
        "--kill-on-invalid-dep=yes",
    ]
    if res.gpus:
        options.append(f"--gres=gpu:{res.gpus}")
    minutes = time_limit_minutes(step)
    if minutes is not None:
        options.append(f"--time={minutes}")
    if unit.is_array:
        options.append(f"--array={array_spec(unit.tasks)}")
    return options


class Submission(UnitSubmission):
    """Submits units in order, resolving each one's dependencies to the job ids already submitted."""

    def __init__(self, plan: Plan, run_dir: Path, sub: int) -> None:
        super().__init__(plan, run_dir, SlurmRecords(run_dir), sub)

    def _dependency(self, unit: Unit) -> str | None:
        clauses: dict[str, list[str]] = {}
        for kind, parent in unit.unit_deps:
            job = self.unit_jobs[parent]
            assert job is not None, "units are submitted parents first"
            clauses.setdefault(kind, []).append(job)
        if unit.node_deps:
            clauses.setdefault("afterok", []).extend(self.node_refs[parent] for parent in unit.node_deps)
        return ",".join(f"{kind}:{':'.join(jobs)}" for kind, jobs in clauses.items()) or None

    def _submit_one(self, index: int, unit: Unit) -> str:
        options = sbatch_options(self.plan, unit, self.records)
        dependency = self._dependency(unit)
        if dependency:
            options.append(f"--dependency={dependency}")
        path = self.records.script_path(self.sub, unit.name)
        cancel = self.records.cancel_marker(self.sub)
        script = render_script(self.plan, self.plan.steps[unit.step], unit.tasks, self.run_dir, options, cancel)
        path.write_text(script, encoding="utf-8")
        return commands.sbatch(options, str(path))

    def _node_ref(self, record: JobRecord, task: int) -> str:
        return record.ref(task)  # afterok can wait for one array task

    def _withdraw(self, jobs: list[str]) -> None:
        with contextlib.suppress(DagflowError):
            commands.scancel(jobs)


def submit_nodes(plan: Plan, run_dir: Path, todo: Iterable[str], sub: int, arrays: bool = True) -> list[JobRecord]:
    units = plan_units(plan, todo, commands.max_array_size(), arrays)
    return Submission(plan, run_dir, sub).run(units)
