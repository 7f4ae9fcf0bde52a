"""Plan -> HTCondor DAGMan input: one .dag file, one submit description per step, a log directory.

    compile_plan(plan, out_dir) -> path of the .dag file

Submit with `condor_submit_dag <dag>`; node stdout/stderr land in <out_dir>/logs/<node>.out|.err and
every job's events in <out_dir>/dagflow.jobs.log.
"""

from __future__ import annotations

from importlib import resources
from itertools import islice
from pathlib import Path

from dagflow.engines.condor import escape
from dagflow.engines.condor.dag_writer import DagOptions, dag_blocks
from dagflow.engines.condor.manners import FIELDS as MANNERS
from dagflow.engines.condor.manners import Manners, declared
from dagflow.engines.condor.records import DagFiles
from dagflow.engines.condor.submit_writer import Layout, StepSubmit, build_step_submit
from dagflow.engines.condor.transfer import TRANSFER, resolve_data_mode
from dagflow.errors import DagflowError
from dagflow.gc_pause import gc_paused
from dagflow.plan.model import Node, Plan

WRITE_CHUNK = 4096  # blocks (a node's lines, or one header line) per write call


class CondorCompileError(DagflowError):
    """A plan value that cannot be written into HTCondor files (exit code 2)."""


def step_submits(plan: Plan, layout: Layout, accounting: tuple[str, ...] = ()) -> dict[str, StepSubmit]:
    by_step: dict[str, list[Node]] = {name: [] for name in plan.steps}
    for node in plan.nodes.values():
        if node.step not in by_step:
            raise CondorCompileError(f"node {node.name}: unknown step {node.step!r}")
        by_step[node.step].append(node)
    submits = {}
    for name, step in plan.steps.items():
        try:
            submits[name] = build_step_submit(plan, step, by_step[name], layout, accounting)
        except ValueError as error:
            raise CondorCompileError(f"step {name}: {error}") from None
    return submits


def run_manners(plan: Plan, options: DagOptions) -> Manners:
    """The run's accounting group, user and batch name: the flags (options), else the pipeline's."""
    return Manners.of(declared(plan.engine_defaults), {name: getattr(options, name) for name in MANNERS})


def compile_plan(
    plan: Plan,
    out_dir: Path,
    *,
    options: DagOptions | None = None,
    log_dir: Path | None = None,
    data_mode: str | None = None,
) -> Path:
    """Write the DAGMan input for plan into out_dir and return the .dag file's path. data_mode: transfer or
    shared (None: the pipeline's `condor: {data_mode}`, else transfer)."""
    options = options or DagOptions()
    try:
        mode = resolve_data_mode(data_mode, plan)
    except ValueError as error:
        raise CondorCompileError(str(error)) from None
    layout = Layout.for_plan(plan, Path(out_dir), log_dir, mode)
    try:
        stem = escape.node_name(plan.pipeline)
    except ValueError as error:
        raise CondorCompileError(f"pipeline name: {error}") from None
    files = DagFiles.in_dir(layout.out_dir, stem)
    try:
        accounting = tuple(run_manners(plan, options).submit_lines())
    except ValueError as error:
        raise CondorCompileError(str(error)) from None
    submits = step_submits(plan, layout, accounting)
    layout.out_dir.mkdir(parents=True, exist_ok=True)
    layout.log_dir.mkdir(parents=True, exist_ok=True)
    # Write to a temporary name first so a failed compile never leaves a half-written DAG behind.
    partial = files.dag.with_name(files.dag.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="\n") as out, gc_paused():
            blocks = dag_blocks(plan, submits, files, options)
            while chunk := list(islice(blocks, WRITE_CHUNK)):
                out.write("\n".join(chunk))
                out.write("\n")
    except ValueError as error:
        partial.unlink(missing_ok=True)
        raise CondorCompileError(str(error)) from None
    for sub in submits.values():
        sub.path.write_text(sub.text, encoding="utf-8")
    if mode == TRANSFER:
        layout.node_wrapper.write_bytes(resources.files("dagflow.engines.condor").joinpath("node.sh").read_bytes())
        layout.node_wrapper.chmod(0o755)
    partial.replace(files.dag)
    return files.dag


def compile_dag(plan: Plan, out_dir: Path, max_gpu_jobs: int, data_mode: str | None) -> Path:
    """`dagflow compile` (settings.py declares it, the CLI reaches it through the registry): plan's DAGMan
    input in out_dir, at most max_gpu_jobs GPU nodes submitted at once; the .dag file."""
    return compile_plan(plan, out_dir, options=DagOptions(max_gpu_jobs=max_gpu_jobs), data_mode=data_mode)
