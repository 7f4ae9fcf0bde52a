"""HTCondor's two data modes, and what a node's job receives and sends back when nothing is shared.

shared    jobs run in the pipeline's directory (`should_transfer_files = NO`): every file is visible.
transfer  nothing is shared: a job runs in its scratch directory on the execute node and receives, by
          HTCondor file transfer, its declared `inputs` and the files its command runs (argv words that
          are files in the pipeline's directory, and what plan/script_files.py finds beyond them, less
          the node's own outputs), at the same relative paths (`preserve_relative_paths`).
          Its executable is dagflow's node wrapper (node.sh): after a success it checks every declared
          output (and `metrics`) is there, failing the node with a line naming a missing one. Exactly those
          paths come back, each to its own place in the pipeline's directory: they are the node's
          `transfer_output_files` ($(DagflowOutputs)), so nothing else the job writes, wherever and
          whenever, reaches the access point. `success_exit_code = 0` makes a job that exits otherwise
          send back only its stdout and stderr, so a failed command sends nothing and its exit code
          reaches DAGMan (without it, an output the failed command did not write would hold the job,
          whatever its exit code; `when_to_transfer_output = ON_SUCCESS` does not prevent that in
          HTCondor 25.14). Steps that run dagflow itself (transfer steps, `<step>.publish`,
          `<step>.promote`) move data between S3 and the submit side, so they run in the local universe on
          the access point, where the AWS credentials are. What one job sends back is bounded by HTCondor's
          `max_transfer_output_mb` (the pipeline's `condor:` block, else DEFAULT_MAX_TRANSFER_OUTPUT_MB), so
          no job fills the access point's disk; a job over it is held and removed, failing the node.

Paths are relative to the pipeline's directory; absolute paths are ones the execute node provides (an
image, a node-local dataset) and are neither transferred nor rewritten.
"""

from __future__ import annotations

import posixpath
import re

from dagflow.engines.condor import escape
from dagflow.engines.condor.settings import DATA_MODES, DEFAULT_MAX_TRANSFER_OUTPUT_MB
from dagflow.engines.condor.step_fields import SECTION
from dagflow.plan.model import Node, Plan, StepInfo
from dagflow.plan.script_files import ScriptFiles, is_url

TRANSFER, SHARED = DATA_MODES
DEFAULT_DATA_MODE = TRANSFER  # a cloud pool shares no filesystem with the access point

INPUTS_MACRO = "DagflowInputs"
OUTPUTS_MACRO = "DagflowOutputs"

# HTCondor splits transfer lists at commas and trims blanks; no quoting can carry either inside a name.
_LIST_BREAKERS = re.compile(r"[,\s]")
# A hold for a file transfer that waiting cannot mend: TransferOutputError (12) or TransferInputError (13)
# with subcode 2 (ENOENT: a file was not there) or 21 (EISDIR: a symbolic link to a directory, which
# node.sh refuses first for outputs), or MaxTransferOutputSizeExceeded (33: more came back than
# max_transfer_output_mb). The job is removed so the node fails (and DAGMan retries) instead of waiting
# held for ever.
TRANSFER_FAILED_HOLD = (
    "(JobStatus == 5) && ((((HoldReasonCode =?= 12) || (HoldReasonCode =?= 13)) && "
    "((HoldReasonSubCode =?= 2) || (HoldReasonSubCode =?= 21))) || (HoldReasonCode =?= 33))"
)


class DataModeError(ValueError):
    pass


def check_data_mode(mode: str) -> str:
    if mode not in DATA_MODES:
        raise DataModeError(f"unknown data mode {mode!r}; choose one of {', '.join(DATA_MODES)}")
    return mode


def choose_data_mode(flag: str | None, declared: str | None) -> str:
    """The one rule: --data-mode, else the pipeline's `condor: {data_mode}`, else transfer."""
    return check_data_mode(flag or declared or DEFAULT_DATA_MODE)


def resolve_data_mode(flag: str | None, plan: Plan) -> str:
    """The run's data mode (choose_data_mode), the pipeline's as the plan carries it."""
    return choose_data_mode(flag, plan.engine_defaults.get(SECTION, {}).get("data_mode"))


def max_output_mb(plan: Plan) -> int:
    """The most MiB one job sends back: the pipeline's `condor: {max_transfer_output_mb}`, else the default."""
    declared = plan.engine_defaults.get(SECTION, {}).get("max_transfer_output_mb")
    return int(declared or DEFAULT_MAX_TRANSFER_OUTPUT_MB)


def runs_on_access_point(step: StepInfo) -> bool:
    """Steps that run dagflow's own S3/submit-side data movers (transfer, publish, promote)."""
    return step.kind == "transfer"


def _relative(path: str, what: str) -> str | None:
    """The path as HTCondor should name it in the sandbox, or None when it is not transferred
    (a URL, or an absolute path the execute node provides)."""
    if is_url(path) or path.startswith("/"):
        return None
    normal = posixpath.normpath(path)  # also drops a trailing '/': `dir/` would send only dir's contents
    if normal == "." or normal == ".." or normal.startswith("../"):
        raise ValueError(f"{what} {path!r} is outside the pipeline's directory: transfer mode cannot place it "
                         "in the job's directory (give a path inside it, or an absolute one the node has)")
    return normal


def node_inputs(node: Node, script_files: ScriptFiles) -> list[str]:
    """What the node's job receives: declared inputs, then the files its command runs less its own
    products (the rule the local cache keys on: a model the last run left is not sent back in), each once."""
    paths = [_relative(path, "input") for path in node.inputs]
    paths += script_files.of(node)
    return _unique(paths)


def node_outputs(node: Node) -> list[str]:
    """What the node's job sends back: declared outputs and the metrics file, each once."""
    paths = []
    for path in [*node.outputs, *([node.metrics] if node.metrics else [])]:
        relative = _relative(path, "output")
        if relative is None and not is_url(path):
            raise ValueError(f"output {path!r} is an absolute path: in transfer mode a job writes in its own "
                             "directory and only relative outputs come back")
        paths.append(relative)
    return _unique(paths)


def outermost(paths: list[str]) -> list[str]:
    """The paths less those inside another of them (`models/us/metrics.json` beside `models/us`): a
    directory in transfer_output_files comes back whole, so each file is sent once."""
    listed = set(paths)
    return [path for path in paths if not any(parent in listed for parent in _parents(path))]


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]


def _unique(paths: list[str | None]) -> list[str]:
    if None in paths:
        paths = [path for path in paths if path is not None]
    return list(dict.fromkeys(paths))  # type: ignore[arg-type]


def file_list(paths: list[str], what: str) -> str:
    """A transfer_input_files / transfer_output_files value: names joined by commas, `$` made inert.
    A name holding a comma or whitespace cannot be carried by the list and is refused."""
    for path in paths:
        escape.check_text(path, what)
        bad = _LIST_BREAKERS.search(path)
        if bad:
            raise ValueError(f"{what} {path!r} contains {bad.group()!r}: HTCondor's file transfer lists are "
                             "comma-separated, so names with commas or blanks cannot be transferred; rename it")
    return escape.inert_dollars(",".join(paths), what)

