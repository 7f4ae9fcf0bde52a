"""Submitting a plan's unfinished nodes as qsub jobs, and recording their job numbers in the run directory.

Placement: `-pe <pe> N` for cpus above one, `-l mem_free=<M>M` for memory (a scheduling request: the
queue's `h_vmem` would be a hard address-space limit, which kills Python programs that map more than they
use), `-l gpu=N` (the cluster's consumable complex) and `-l h_rt` as a backstop above the wrapper's own
per-attempt timeouts. Names: `-N <unit>.<run id>` (a single node's unit is the node, so it carries its
matrix values) and the Dagflow attributes as the job's context (`-ac`, shown by `qstat -j`). The job
numbers go in the batch engines' records (engines/batch/records.py) under `<run>/sge/`.

Jobs: the batch engines' grouping (engines/batch/units.py, one job array per step where the wiring allows),
renumbered. `qsub -t` takes one range, and `-hold_jid_ad` (task i waits for task i of the parent array,
Slurm's `aftercorr`) wants both arrays to have the same range. So an array's tasks are numbered 1..n in the
order of their index within the step: two arrays that correspond submit the same indices, so they get the
same numbers, and a resume that submits only some of a step's nodes still gets one range. A single-node
job's task is -1.

Each job's script runs its node(s) through the shared node wrapper (engines/batch/node.py) with
`--parent`: `-hold_jid` waits for a parent job to end, not to succeed, so the wrapper checks its parents'
journal records and journals `upstream_failed` instead of running below a failure. Retries and
`unless_exit` happen inside the job, as on Slurm.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from pathlib import Path

from dagflow.engines.batch.records import BatchRecords, JobRecord
from dagflow.engines.batch.script import SINGLE, CancelMarker, job_script
from dagflow.engines.batch.submission import UnitSubmission, job_attributes, option_path, time_limit_s
from dagflow.engines.batch.units import Unit, plan_units
from dagflow.engines.sge import commands
from dagflow.engines.sge.settings import DEFAULT_PE
from dagflow.errors import DagflowError
from dagflow.plan import Plan, StepInfo

_NOT_IN_NAME = re.compile(r"[\s/:@\\*?,]")  # characters Grid Engine refuses in a job name (and -ac's comma)
# Measured with qsub 8.1.9: -o and -wd expand $JOB_ID, $TASK_ID, $HOME, ... (a job in Eqw when the result is
# missing); -o reads `host:path` and a comma-separated list.
_EXPANDS = {"$": "Grid Engine expands $JOB_ID, $HOME, ... in it"}
_IN_OUTPUT = {**_EXPANDS, ":": "-o reads it as host:path", ",": "-o reads it as a list of paths"}


def sge_units(plan: Plan, todo: Iterable[str], max_array: int, arrays: bool = True) -> list[Unit]:
    units = plan_units(plan, todo, max_array, arrays)
    for unit in units:
        if unit.is_array:
            unit.tasks = {number: unit.tasks[task] for number, task in enumerate(sorted(unit.tasks), start=1)}
    return units


def render_script(
    plan: Plan,
    step: StepInfo,
    tasks: dict[int, str],
    run_dir: Path,
    qsub_argv: list[str],
    cancel: CancelMarker | None = None,
) -> str:
    """The job script of one unit; tasks maps array task id (-1: not an array) to node name."""
    ids = ("$JOB_ID" if list(tasks) == [SINGLE] else "$JOB_ID.$SGE_TASK_ID", "SGE_TASK_ID")
    return job_script(plan, step, tasks, run_dir, ("qsub", qsub_argv), ids, parents=True, cancel=cancel)


def context(plan: Plan, unit: Unit) -> str:
    """The Dagflow attributes of a job as `-ac name=value,...`; values with a comma cannot be said there."""
    attrs = job_attributes(plan, unit, with_node=True)
    return ",".join(f"{name}={value}" for name, value in attrs.items() if "," not in f"{value}")


def qsub_options(plan: Plan, unit: Unit, records: BatchRecords, pe: str = DEFAULT_PE) -> list[str]:
    step = plan.steps[unit.step]
    res = step.resources
    options = [
        "-N", _NOT_IN_NAME.sub("_", f"{unit.name}.{plan.run_id}"),
        "-S", "/bin/bash",
        "-wd", option_path(Path(plan.workdir).absolute(), "-wd", "Grid Engine", _EXPANDS),
        "-o", option_path(records.wrapper_log, "-o", "Grid Engine", _IN_OUTPUT),
        "-j", "y",
        "-r", "n",
        "-ac", context(plan, unit),
        "-l", f"mem_free={res.memory_mb}M",
    ]  # fmt: skip
    if res.cpus > 1:
        options += ["-pe", pe, str(res.cpus)]
    if res.gpus:
        options += ["-l", f"gpu={res.gpus}"]
    seconds = time_limit_s(step)
    if seconds is not None:
        options += ["-l", f"h_rt={seconds}"]
    if unit.is_array:
        options += ["-t", f"1-{len(unit.tasks)}"]
    return options


class Submission(UnitSubmission):
    """Submits units in order, resolving each one's holds to the job numbers already submitted."""

    def __init__(self, plan: Plan, run_dir: Path, sub: int, pe: str = DEFAULT_PE) -> None:
        super().__init__(plan, run_dir, BatchRecords(run_dir, "sge"), sub)
        self.pe = pe

    def _holds(self, unit: Unit) -> list[str]:
        """-hold_jid for whole parent jobs (a single node after an array task waits for the whole array:
        Grid Engine cannot hold on one task), -hold_jid_ad for corresponding arrays."""
        whole: dict[str, None] = {}
        corresponding: dict[str, None] = {}
        for kind, parent in unit.unit_deps:
            job = self.unit_jobs[parent]
            assert job is not None, "units are submitted parents first"
            (corresponding if kind == "aftercorr" else whole)[job] = None
        for parent in unit.node_deps:
            whole[self.node_refs[parent]] = None
        options = []
        if whole:
            options += ["-hold_jid", ",".join(whole)]
        if corresponding:
            options += ["-hold_jid_ad", ",".join(corresponding)]
        return options

    def _submit_one(self, index: int, unit: Unit) -> str:
        options = qsub_options(self.plan, unit, self.records, self.pe) + self._holds(unit)
        path = self.records.script_path(self.sub, unit.name)
        cancel = self.records.cancel_marker(self.sub)
        script = render_script(self.plan, self.plan.steps[unit.step], unit.tasks, self.run_dir, options, cancel)
        path.write_text(script, encoding="utf-8")
        return commands.qsub(options, str(path))

    def _node_ref(self, record: JobRecord, task: int) -> str:
        return record.job  # a hold names a whole job: Grid Engine cannot hold on one array task

    def _withdraw(self, jobs: list[str]) -> None:
        with contextlib.suppress(DagflowError):
            commands.qdel(jobs)


def submit_nodes(
    plan: Plan, run_dir: Path, todo: Iterable[str], sub: int, arrays: bool = True, pe: str = DEFAULT_PE
) -> list[JobRecord]:
    units = sge_units(plan, todo, commands.max_array_size(), arrays)
    return Submission(plan, run_dir, sub, pe).run(units)
