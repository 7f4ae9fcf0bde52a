"""Submitting a plan's unfinished nodes as sbatch jobs, and recording their job ids in the run directory
(the batch engines' records, engines/batch/records.py, under `<run>/slurm/`).

Each job array or single-node job's batch script runs its node(s) through the shared node wrapper
(`python -m dagflow.engines.batch.node`, see engines/batch/node.py), which does for one node what the local
runner does: journals each attempt's `start` and `end`, sends the node's output to `logs/<node>.out|.err`,
and retries. Slurm has no per-job retry count, so attempts happen inside the job, and only the last failure
fails the job (which is what `afterok` and `kill_invalid_depend` act on). Each attempt has the step's
timeout; the job's `--time` is a backstop sized for every attempt.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable
from itertools import groupby
from pathlib import Path

from dagflow.engines.batch.records import BatchRecords, JobRecord
from dagflow.engines.batch.script import CancelMarker, job_script
from dagflow.engines.batch.submission import UnitSubmission, job_attributes, option_path, time_limit_s
from dagflow.engines.batch.units import Unit, plan_units
from dagflow.engines.slurm import commands
from dagflow.errors import DagflowError
from dagflow.plan import Plan, StepInfo


def render_script(
    plan: Plan,
    step: StepInfo,
    tasks: dict[int, str],
    run_dir: Path,
    sbatch_argv: list[str],
    cancel: CancelMarker | None = None,
) -> str:
    """The batch script of one unit; tasks maps array task id (-1: not an array) to node name."""
    ids = ("$SLURM_JOB_ID", "SLURM_ARRAY_TASK_ID")
    return job_script(plan, step, tasks, run_dir, ("sbatch", sbatch_argv), ids, parents=False, cancel=cancel)


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


def sbatch_options(plan: Plan, unit: Unit, records: BatchRecords) -> list[str]:
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
        super().__init__(plan, run_dir, BatchRecords(run_dir, "slurm"), sub)

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
