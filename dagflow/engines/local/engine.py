"""The local engine's entry points: run a Plan on this machine, resume a run, or drive it through the
Engine contract (prepare / submit / status / cancel) as a detached background runner.

Rerun semantics. `resume_local` (`dagflow run --resume ID`) continues one run: the journal says what
finished, and only the rest runs. Running a pipeline again (`dagflow run pipeline.yaml`) starts a new
run with a new id, and the cache decides node by node: whatever succeeded before with the same command,
environment, params, input content and upstream is skipped and shown as cached. The cache, unlike a
journal, stays correct when the pipeline or its input files changed between the two runs.

A run never shares a node with an earlier live run (a killed runner's keeper may still run its nodes): the
commands that start or continue runs check that first (dagflow/run/live_runs.py), and a plain run that is
exactly such a cut-short run continues it instead, adopting its live nodes.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

from dagflow.data import with_import_root
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.resources import Machine, ResourceError, detect_machine, infeasible
from dagflow.engines.local.runner import LocalRunner, RunStorageError
from dagflow.engines.registry import engine_of_run, spec_checks
from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Plan
from dagflow.plan.graph import PlanError, check_plan
from dagflow.run.ids import validate_run_id
from dagflow.run.layout import RunLayout, find_run
from dagflow.run.lock import holder_pid, is_locked
from dagflow.run.replan import changed_nodes, replanned
from dagflow.run.result import RunResult
from dagflow.run.status import read_status


class RunExistsError(DagflowError):
    pass


def check_runnable(plan: Plan, options: RunOptions) -> Machine:
    """Everything that can be wrong before a node starts: the plan, --force names, resources."""
    check_plan(plan)
    if options.jobs is not None and options.jobs < 1:
        raise ResourceError(f"--jobs must be at least 1, not {options.jobs}")
    known = set(plan.steps) | set(plan.nodes)
    unknown = [name for name in options.force if name not in known]
    if unknown:
        raise PlanError(
            f"--force {unknown[0]}: no such step or node (steps: {', '.join(sorted(plan.steps)) or 'none'})"
        )
    need_gpus = any(plan.steps[node.step].resources.gpus for node in plan.nodes.values())
    machine = detect_machine(options.gpus, need_gpus)
    problems = infeasible(plan, machine)
    if problems:
        raise ResourceError("these nodes can never start on this machine:\n  " + "\n  ".join(problems))
    return machine


def prepare_run(plan: Plan, options: RunOptions) -> tuple[RunLayout, Machine]:
    """Check the plan and create its run directory (plan.json, empty journal, logs/); start nothing.

    plan.json gets the workdir made absolute, so a resume from another directory runs nodes in the
    same place.
    """
    validate_run_id(plan.run_id)
    machine = check_runnable(plan, options)
    layout = RunLayout(Path(options.runs_dir).absolute(), plan.run_id)
    if layout.exists():
        raise RunExistsError(
            f"run {plan.run_id} already exists in {layout.runs_dir}; resume it with "
            f"`dagflow run --resume {plan.run_id}` or choose another --run-id"
        )
    plan = dataclasses.replace(plan, workdir=os.path.abspath(plan.workdir))
    try:
        layout.create(plan, engine=options.engine)
    except OSError as error:
        if error.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        raise RunStorageError(f"cannot create run {plan.run_id} under {layout.runs_dir}: {error.strerror}") from None
    return layout, machine


def run_local(plan: Plan, options: RunOptions | None = None) -> RunResult:
    """Run plan to the end on this machine in a new run directory `<runs_dir>/<plan.run_id>/`.

    Blocks until every node has finished, failed, or the run was stopped; raises DagflowError (exit
    code 2) for problems found before anything starts. Nodes unchanged since they last succeeded are
    skipped (see cache.py). Set options.handle_signals on the main thread so Ctrl-C stops cleanly.
    """
    options = options or RunOptions()
    plan = dataclasses.replace(plan, workdir=os.path.abspath(plan.workdir))
    layout, machine = prepare_run(plan, options)
    layout.mark_latest()
    return LocalRunner(plan, layout, machine, options).run()


def resume_local(run_id: str | None, options: RunOptions | None = None) -> RunResult:
    """Run again what did not finish in run run_id ("latest" or None: the latest run under runs_dir).

    Finished nodes are read from the journal and not rerun; a node an earlier runner left running is
    adopted and waited for, and one that finished while no runner was alive has its result taken (see
    procs.py). When the pipeline file the run came from has changed since (a fixed typo, say), the run
    is re-planned from it: plan.json is replaced, finished nodes that are unchanged (same command,
    environment, params, declared paths and parents, all of them unchanged too) are kept, and the rest
    run again; an edit that does not load fails here, with the file's own error.
    """
    options = options or RunOptions()
    layout = find_run(Path(options.runs_dir), run_id)
    engine = engine_of_run(layout)
    if engine != options.engine:
        # Its nodes ran (or run) elsewhere and its journal is not the local runner's: running it here
        # would run finished work again and write into another engine's run directory.
        raise RunExistsError(
            f"run {layout.run_id} was started with --engine {engine}; continue it there "
            f"(`dagflow run --resume {layout.run_id}` picks that engine by itself)"
        )
    plan = layout.load_plan()
    return _continue(layout, plan, replanned(layout, plan, spec_checks("local")), options)


def _continue(layout: RunLayout, plan: Plan, fresh: Plan | None, options: RunOptions) -> RunResult:
    """Run what did not finish of the run in layout, planned as plan, or as fresh where that differs."""
    forget: frozenset[str] = frozenset()
    if fresh is not None:
        check_runnable(fresh, options)
        forget = changed_nodes(plan, fresh)
        write_atomic(layout.plan_path, fresh.to_json().encode())
        layout.record_pipeline(fresh)
        kept = sum(1 for name in fresh.nodes if name not in forget)
        print(
            f"dagflow: {fresh.source} changed since run {layout.run_id} was planned: re-planned from it "
            f"({kept} node(s) unchanged, {len(forget)} changed)",
            file=sys.stderr,
        )
        plan = fresh
    machine = check_runnable(plan, options)
    layout.mark_latest()
    return LocalRunner(plan, layout, machine, options, forget).run()


class LocalEngine:
    """The Engine contract: submit starts a detached `dagflow run --resume` on the prepared run."""

    name = "local"

    def __init__(self, options: RunOptions | None = None) -> None:
        self.options = options or RunOptions()

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        options = self._options_for(run_dir)
        if plan.run_id != Path(run_dir).name:
            raise RunExistsError(f"run_dir {run_dir} must be named after the plan's run id {plan.run_id}")
        prepare_run(plan, options)

    def submit(self, plan: Plan, run_dir: Path) -> str:
        layout = RunLayout.from_run_dir(run_dir)
        if not layout.exists():
            self.prepare(plan, layout.run_dir)
        argv = [sys.executable, "-m", "dagflow", "run", "--resume", layout.run_id, "--json"]
        argv += ["--runs-dir", str(layout.runs_dir), "--kill-grace", str(self.options.kill_grace_s)]
        if self.options.jobs:
            argv += ["--jobs", str(self.options.jobs)]
        if self.options.gpus is not None:
            argv += ["--gpus", self.options.gpus]
        for name in self.options.force:
            argv += ["--force", name]
        if not self.options.use_cache:
            argv.append("--no-cache")
        env = dict(os.environ)
        env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
        with open(layout.runner_log_path, "ab") as log:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=env
            )
        layout.runner_pid_path.write_text(f"{proc.pid}\n")
        layout.mark_latest()  # its runner marks it too, once it starts
        return str(proc.pid)

    def status(self, run_dir: Path) -> dict[str, str]:
        return read_status(RunLayout.from_run_dir(run_dir)).node_states()

    def cancel(self, run_dir: Path) -> None:
        layout = RunLayout.from_run_dir(run_dir)
        pid = holder_pid(layout.lock_path) if is_locked(layout.lock_path) else None
        if pid is not None:
            os.kill(pid, signal.SIGTERM)

    def _options_for(self, run_dir: Path) -> RunOptions:
        return dataclasses.replace(self.options, runs_dir=RunLayout.from_run_dir(run_dir).runs_dir)
