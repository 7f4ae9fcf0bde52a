"""One submit description per step, from the step kind's template; per-node values as VARS macros.

Per-step values (resources, requirements, custom ClassAds) are written into the step's file at
compile time. Per-node values (argv, env, matrix coordinates) reach the same file through DAGMan
VARS, so 100k nodes share a handful of submit files.
"""

from __future__ import annotations

import posixpath
import sys
from dataclasses import dataclass
from pathlib import Path

import classad2

from dagflow.data import IMPORT_ROOT
from dagflow.engines.condor import escape
from dagflow.engines.condor.checkpoint import checkpoint_lines
from dagflow.engines.condor.gpu_memory import fill_match_time
from dagflow.engines.condor.memory_policy import with_memory_growth
from dagflow.engines.condor.step_fields import custom_attributes, requirements_expression
from dagflow.engines.condor.templates import fill, load_template
from dagflow.engines.condor.transfer import (
    INPUTS_MACRO,
    OUTPUTS_MACRO,
    SHARED,
    TRANSFER,
    TRANSFER_FAILED_HOLD,
    ScriptFiles,
    file_list,
    max_output_mb,
    node_inputs,
    node_outputs,
    outermost,
    runs_on_access_point,
)
from dagflow.files import file_stem
from dagflow.plan.model import Node, Plan, Runtime, StepInfo
from dagflow.spec import attributes
from dagflow.spec.attributes import attribute_name
from dagflow.text import CONTROL_CHARACTERS

ARGS_MACRO = "DagflowArgs"
ENV_MACRO = "DagflowEnv"
# A node whose name is no file name (too long: file_stem) names its logs by this macro instead of $(JOB).
LOG_MACRO = "DagflowLog"
TRIAL_ATTRIBUTE = attributes.TRIAL
# A job starts with no PATH of its own; after the submitter's interpreter, the usual system directories.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
BUILTIN_ATTRIBUTES = frozenset(name.lower() for name in attributes.BUILTIN_ATTRIBUTES)
# HoldReasonCode 47 (JobExecuteExceeded): allowed_execute_duration puts the job on hold; removing it
# makes the node fail, so DAGMan's RETRY applies instead of the DAG waiting on a held job forever.
TIMEOUT_REMOVE = "(JobStatus == 5) && (HoldReasonCode =?= 47)"
# Transfer mode: the job's executable is this wrapper (engines/condor/node.sh), copied beside the DAG.
NODE_WRAPPER = "dagflow-node.sh"
EVENT_LOG = "dagflow.jobs.log"  # every node job's event log (`log =`), beside the DAG
# A step that requests no GPU never runs in a dynamic slot that holds one. The schedd keeps a claimed slot
# and "will keep running jobs on that slot as long as it has more jobs with matching requirements" (HTCondor
# manual, startd configuration, CLAIM_WORKLIFE): after a GPU step, the next CPU-only node of the DAG would
# run in the GPU step's dynamic slot and leave its GPU idle. A partitionable slot (DynamicSlot undefined)
# still matches, and the startd carves the job a slot without GPUs (RequestGPUs = 0); so does a machine
# without GPUs (GPUs undefined). GPU steps leave TARGET.GPUs unnamed: condor_submit adds its own GPU count
# clause only when the requirements do not name it.
CPU_ONLY_SLOT = "((TARGET.DynamicSlot =!= true) || ((TARGET.GPUs ?: 0) == 0))"


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the generated files and the jobs' logs go (absolute paths)."""

    out_dir: Path
    log_dir: Path
    event_log: Path
    workdir: Path
    data_mode: str = SHARED  # engines/condor/transfer.py: shared or transfer

    @classmethod
    def for_plan(cls, plan: Plan, out_dir: Path, log_dir: Path | None = None, data_mode: str = SHARED) -> Layout:
        out_dir = Path(out_dir).absolute()
        return cls(
            out_dir=out_dir,
            log_dir=Path(log_dir).absolute() if log_dir else out_dir / "logs",
            event_log=out_dir / EVENT_LOG,
            workdir=Path(plan.workdir).absolute(),
            data_mode=data_mode,
        )

    @property
    def node_wrapper(self) -> Path:
        return self.out_dir / NODE_WRAPPER

    def submit_file(self, step: str) -> Path:
        return self.out_dir / f"{step}.sub"


@dataclass(frozen=True, slots=True)
class StepSubmit:
    """A step's generated submit description and the VARS macros each of its nodes sets."""

    step: str
    path: Path
    text: str
    axis_macros: tuple[tuple[str, str], ...]  # (axis, macro name), in the step's axis order
    has_trial: bool
    dagman_retry_unless_exit: int | None  # the one code DAGMan's RETRY ... UNLESS-EXIT can carry
    dagman_retries: int  # retries DAGMan does (0 when the job itself retries)
    # transfer mode, execute-node steps: each node's argv goes to the wrapper after its outputs, and its
    # transfer_input_files list is a VARS macro; the workdir finds its script files
    transfers: bool = False
    workdir: Path = Path(".")
    python: str | None = None  # runtime.python: replaces a command's `python`
    gpus: int = 0  # GPUs each node requests ({gpu.memory_mb} takes the smallest of them: gpu_memory.py)
    # transfer mode, a step in plan.progress_steps: the wrapper copies each node's metric lines onto its
    # stderr (--progress), which stream_error brings to the access point while the job runs
    streams_progress: bool = False
    log_macro: bool = False  # a node's name is no file name: its logs are named by LOG_MACRO, not $(JOB)


def runtime_environment(runtime: Runtime | None = None) -> dict[str, str]:
    """What a job needs on its execute node. By default the compiling interpreter's directory first on PATH,
    so `python` and `dagflow` are the submitter's virtual environment's, and this dagflow importable (the
    same paths must exist there: a shared filesystem, this test pool, or an image built alike). With
    runtime.python, that interpreter's directory instead; in a container image, the image's own PATH
    entries after the system directories. A node's own environment comes after it and wins."""
    runtime = runtime or Runtime()
    if runtime.python:
        return {"PATH": f"{Path(runtime.python).parent}:{SYSTEM_PATH}"}
    if runtime.container_image:
        return {"PATH": SYSTEM_PATH}
    bindir = str(Path(sys.executable).parent)
    return {"PATH": f"{bindir}:{SYSTEM_PATH}", "PYTHONPATH": IMPORT_ROOT}


def axis_macro(axis: str) -> str:
    """The axis's Dagflow* attribute name (spec/attributes.py), checked as a submit macro name too."""
    return escape.macro_name(escape.attribute_name(attribute_name(axis), f"matrix axis {axis!r}"))


def requirements(step: StepInfo) -> str:
    res = step.resources
    clauses = [
        "(TARGET.Cpus >= RequestCpus)",
        "(TARGET.Memory >= RequestMemory)",
        "(TARGET.Disk >= RequestDisk)",
    ]
    if res.gpus > 0:
        # TARGET.-scoped: an unscoped name is looked up in the job ad first (classad2's symmetricMatch does
        # not fall back to the machine ad at all). No GPU count or per-GPU clause: condor_submit adds
        # `countMatches(MY.RequireGPUs, TARGET.AvailableGPUs) >= RequestGPUs` (or `TARGET.GPUs >= RequestGPUs`
        # without per-GPU limits) itself, and leaves it out when the requirements already name TARGET.GPUs.
        clauses.append("(TARGET.HAS_GPU =?= true)")
    else:
        clauses.append(CPU_ONLY_SLOT)
    expression = requirements_expression(step)
    if expression:
        clauses.append("(" + _one_line_expression(step, expression) + ")")
    return escape.submit_literal(" && ".join(clauses), f"step {step.name} requirements")


def _one_line_expression(step: StepInfo, text: str) -> str:
    """The step's requirements checked by HTCondor's parser; a multi-line YAML expression is re-serialised
    by it onto one line."""
    try:
        tree = classad2.ExprTree(text)
    except Exception as error:
        raise ValueError(f"step {step.name} requirements is not a ClassAd expression: {error}") from None
    one_line = str(tree) if CONTROL_CHARACTERS.search(text) else text
    return escape.check_text(one_line, f"step {step.name} requirements")


def _submit_line(command: str, value: str) -> str:
    return f"{command:<24} = {value}"


def gpu_lines(step: StepInfo) -> list[str]:
    """Per-GPU limits, so a machine with mixed GPUs hands the job a GPU that fits (HTCondor matches
    each of the slot's GPUs, not a slot-wide GPUs_GlobalMemoryMb that mixed GPUs leave undefined)."""
    res = step.resources
    if res.gpus <= 0:
        return []
    lines = []
    if res.gpu_memory_mb is not None:
        memory = escape.classad_value(int(res.gpu_memory_mb), f"step {step.name} resources gpu_memory")
        lines.append(_submit_line("gpus_minimum_memory", memory))
    if res.cuda_capability is not None:
        capability = escape.classad_value(float(res.cuda_capability), f"step {step.name} resources cuda_capability")
        lines.append(_submit_line("gpus_minimum_capability", capability))
    return lines


def _attributes(step: StepInfo, axis_macros: tuple[tuple[str, str], ...], has_trial: bool) -> list[str]:
    lines = [f"My.{macro} = $({macro})" for _, macro in axis_macros]
    if has_trial:
        lines.append(f"My.{TRIAL_ATTRIBUTE} = $({TRIAL_ATTRIBUTE})")
    taken = BUILTIN_ATTRIBUTES | {macro.lower() for _, macro in axis_macros}
    for name, value in custom_attributes(step).items():
        escape.attribute_name(name, f"step {step.name} classad")
        if name.lower() in taken:
            raise ValueError(f"step {step.name} classad {name!r} clashes with an attribute dagflow sets")
        lines.append(f"My.{name} = {escape.classad_value(value, f'step {step.name} classad {name}')}")
    return lines


def _policy(step: StepInfo, job_retries: bool, transfers: bool = False) -> list[str]:
    lines = []
    removals = []
    if step.timeout_s is not None:
        lines.append(f"allowed_execute_duration = {int(step.timeout_s)}")
        removals.append(TIMEOUT_REMOVE)
    if transfers:
        removals.append(TRANSFER_FAILED_HOLD)  # e.g. a declared input gone before the job started
    if removals:
        lines.append("periodic_remove = " + " || ".join(f"({clause})" for clause in removals))
    if transfers:
        # A job that exits otherwise sends back its stdout and stderr only, not transfer_output_files: it is
        # not held for outputs it never wrote, and its exit code reaches DAGMan (transfer.py).
        lines.append("success_exit_code = 0")
    if job_retries:
        # DAGMan's RETRY takes one UNLESS-EXIT code; for several, the job retries itself.
        codes = ", ".join(str(int(code)) for code in step.retry_unless_exit)
        lines.append(f"max_retries = {int(step.retries)}")
        lines.append(f"retry_until = member(ExitCode, {{{codes}}})")
    elif transfers:
        lines.append("max_retries = 0")  # success_exit_code alone turns on HTCondor's job retries (2 by default)
    return with_memory_growth(step, lines)  # memory_policy.py: merges its periodic_remove into the one above


def _universe(step: StepInfo, layout: Layout) -> str:
    if layout.data_mode == TRANSFER and runs_on_access_point(step):
        return "local"  # dagflow's own S3/submit-side movers run on the access point, not on a GPU node
    return "container" if step.runtime.container_image else "vanilla"


def _transfer_lines(transfers: bool, streams_progress: bool, output_mb: int) -> list[str]:
    if not transfers:
        return []
    # HTCondor: "If True, then stderr is streamed back to the machine from which the job was submitted"
    # (stream_error, with `error`): the node's metric lines, marked by the wrapper, reach the access point
    # while it runs (search early stopping reads them there; search/progress.py).
    streaming = ["stream_error             = true"] if streams_progress else []
    return [
        *streaming,
        "when_to_transfer_output  = ON_EXIT",
        "preserve_relative_paths  = true",
        f"transfer_input_files     = $({INPUTS_MACRO})",
        # Exactly the node's declared outputs and metrics file, each back at its own path; quoted, so a node
        # with none sends back nothing (left empty, HTCondor would send back every new file).
        f'transfer_output_files    = "$({OUTPUTS_MACRO})"',
        # what one job may send back, so that no job fills the access point's disk (transfer.py)
        f"max_transfer_output_mb   = {output_mb}",
    ]


def _runtime_lines(step: StepInfo, universe: str) -> list[str]:
    if universe != "container":
        return []
    image = escape.submit_literal(step.runtime.container_image or "", f"step {step.name} runtime container_image")
    return [_submit_line("container_image", image)]


def build_step_submit(
    plan: Plan, step: StepInfo, nodes: list[Node], layout: Layout, accounting: tuple[str, ...] = ()
) -> StepSubmit:
    """The step's submit description; accounting: the run's accounting_group lines (manners.py)."""
    escape.node_name(step.name)
    axis_macros = tuple((axis, axis_macro(axis)) for axis in step.axes)
    has_trial = "trial" not in step.axes and any(node.trial is not None for node in nodes)
    job_retries = step.retries > 0 and len(step.retry_unless_exit) > 1
    res = step.resources
    universe = _universe(step, layout)
    transfers = layout.data_mode == TRANSFER and universe != "local"
    streams_progress = transfers and step.name in plan.progress_steps
    log_macro = any(file_stem(node.name) != node.name for node in nodes)
    fields = {
        "universe": universe,
        "executable": escape.submit_literal(str(layout.node_wrapper), "node wrapper") if transfers else "/usr/bin/env",
        "transfer_executable": "true" if transfers else "false",
        "should_transfer_files": "YES" if transfers else "NO",
        "transfer": "\n".join(_transfer_lines(transfers, streams_progress, max_output_mb(plan))),
        "runtime": "\n".join(_runtime_lines(step, universe)),
        "workdir": escape.submit_literal(str(layout.workdir), "workdir"),
        "log_dir": escape.submit_literal(str(layout.log_dir), "log directory"),
        "log_name": f"$({LOG_MACRO})" if log_macro else "$(JOB)",
        "event_log": escape.submit_literal(str(layout.event_log), "event log"),
        "request_cpus": str(int(res.cpus)),
        "request_memory": f"{int(res.memory_mb)}M",
        "request_disk": f"{int(res.disk_mb)}M",
        "request_gpus": str(int(res.gpus)),
        "requirements": requirements(step),
        "gpus": "\n".join(gpu_lines(step)),
        "pipeline": escape.classad_string(plan.pipeline, "pipeline name"),
        "run_id": escape.classad_string(plan.run_id, "run id"),
        "step": escape.classad_string(step.name, "step name"),
        "kind": escape.classad_string(step.kind, "step kind"),
        "runtime_env": escape.environment(runtime_environment(step.runtime), "runtime environment"),
        "attributes": "\n".join([*accounting, *_attributes(step, axis_macros, has_trial)]),
        "policy": "\n".join(
            [*_policy(step, job_retries, transfers), *checkpoint_lines(step, nodes, transfer=transfers)]
        ),
    }
    header = [
        f"# generated by dagflow compile for step {step.name} of pipeline {plan.pipeline} "
        f"(run {plan.run_id}) from the {step.kind}.sub template; edit the template, not this file.",
    ]
    text = fill(load_template(step.kind), fields, header)
    return StepSubmit(
        step=step.name,
        path=layout.submit_file(step.name),
        text=text,
        axis_macros=axis_macros,
        has_trial=has_trial,
        dagman_retry_unless_exit=step.retry_unless_exit[0] if len(step.retry_unless_exit) == 1 else None,
        dagman_retries=0 if job_retries else int(step.retries),
        transfers=transfers,
        workdir=layout.workdir,
        python=step.runtime.python,
        gpus=int(step.resources.gpus),
        streams_progress=streams_progress,
        log_macro=log_macro,
    )


class NodeVars:
    """Builds each node's VARS pairs for one step, memoising what nodes share (env, coordinates, the
    program name's check)."""

    def __init__(self, sub: StepSubmit) -> None:
        self.sub = sub
        # Keyed by id(): expand() hands every node of a step the same env dict when it is constant.
        # Each memo holds the value as submit text and as the inside of a DAGMan VARS value.
        self._env: dict[int, tuple[dict[str, str], tuple[str, str]]] = {}
        self._coords: dict[str | None, tuple[str, str]] = {None: ("undefined", "undefined")}
        self._axes = tuple(axis for axis, _ in sub.axis_macros)
        self._programs: set[str] = set()  # argv[0] values already checked
        self._script_files = ScriptFiles(sub.workdir)
        self._runtime = Runtime(python=sub.python) if sub.python else None

    def _environment(self, env: dict[str, str]) -> tuple[str, str]:
        hit = self._env.get(id(env))
        if hit is not None and hit[0] is env:
            return hit[1]
        text = fill_match_time(escape.environment(env), self.sub.gpus)
        forms = (text, escape.vars_escape(text))
        self._env[id(env)] = (env, forms)
        return forms

    def _coordinate(self, axis: str, value: str | None) -> tuple[str, str]:
        forms = self._coords.get(value)
        if forms is None:
            literal = escape.classad_string(value, f"matrix {axis}")  # type: ignore[arg-type]
            forms = self._coords[value] = (literal, escape.vars_escape(literal))
        return forms

    def _check_program(self, argv: list[str]) -> None:
        if not argv:
            raise ValueError("the command is empty")
        first = argv[0]
        if first.startswith("-") or "=" in first:
            # /usr/bin/env would read it as an option or a VAR=value assignment, not a program.
            raise ValueError(f"program name {first!r} must not start with '-' or contain '='")
        self._programs.add(first)

    def macros(self) -> list[str]:
        """The macro names every node of the step sets, in the order values() gives them."""
        names = [ARGS_MACRO, ENV_MACRO] + [macro for _, macro in self.sub.axis_macros]
        if self.sub.transfers:
            names += [INPUTS_MACRO, OUTPUTS_MACRO]
        if self.sub.has_trial:
            names.append(TRIAL_ATTRIBUTE)
        return [*names, LOG_MACRO] if self.sub.log_macro else names

    def values(self, node: Node, for_vars: bool = False) -> list[str]:
        """The node's macro values, already submit-language text, in macros() order; with for_vars,
        each also escaped as the inside of a DAGMan VARS value (`\\` and `"` backslash-escaped)."""
        argv = node.argv
        if not argv or argv[0] not in self._programs:
            self._check_program(argv)
        form = 1 if for_vars else 0
        if self._runtime is not None:
            argv = self._runtime.argv(argv)
        sub = self.sub
        outputs = node_outputs(node) if sub.transfers else []
        if sub.transfers:
            file_list(outputs, "output")  # the wrapper checks each is there, split at blanks: none in a name
            argv = [str(len(outputs)), *outputs, *argv]
            if sub.streams_progress and node.metrics:
                # the metrics file as the job's directory names it (it is among the outputs, checked above)
                argv = ["--progress", posixpath.normpath(node.metrics), *argv]
        arguments = fill_match_time(escape.arguments(argv), sub.gpus)
        values = [escape.vars_escape(arguments) if for_vars else arguments, self._environment(node.env)[form]]
        coords = node.coords
        memo = self._coords
        for axis in self._axes:
            value = coords.get(axis)
            forms = memo.get(value) or self._coordinate(axis, value)
            values.append(forms[form])
        if sub.transfers:
            inputs = file_list(node_inputs(node, self._script_files), "input")
            for files in (inputs, file_list(outermost(outputs), "output")):
                values.append(escape.vars_escape(files) if for_vars else files)
        if sub.has_trial:
            values.append("undefined" if node.trial is None else str(int(node.trial)))
        if sub.log_macro:
            values.append(file_stem(node.name))  # names as the plan's allow: letters, digits, `.`, `_`, `-`
        return values

    def __call__(self, node: Node) -> list[tuple[str, str]]:
        """(macro, value) pairs for a node's VARS line."""
        return list(zip(self.macros(), self.values(node), strict=True))


def node_vars(sub: StepSubmit, node: Node) -> list[tuple[str, str]]:
    """(macro, value) pairs for one node's VARS line (see NodeVars for the batch form)."""
    return NodeVars(sub)(node)
