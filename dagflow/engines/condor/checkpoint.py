"""The submit lines of a self-checkpointing step (its `checkpoint:`), HTCondor's documented idiom.

HTCondor restarts a job that exits with `checkpoint_exit_code` at once, in the same sandbox on the same
machine; that exit is no job termination, so DAGMan sees no failure and retries stay untouched. Where
files are transferred (the `transfer` data mode) it first sends `transfer_checkpoint_files` to the
access point's spool, and a job evicted later (`condor_vacate_job`, a draining or vanished machine)
starts elsewhere with its last checkpoint transferred in (`when_to_transfer_output = ON_EXIT_OR_EVICT`,
which needs `should_transfer_files = YES`). On a shared filesystem (the `shared` mode) the files never
move: the job writes them in place, so only the exit code is said (condor_submit refuses
ON_EXIT_OR_EVICT together with `should_transfer_files = NO`).

HTCondor itself does not cap the restarts: `checkpoint.max_restarts` becomes a clause of the job's
`periodic_remove` on `CheckpointNumber` (the number of its latest checkpoint, from 0, counted in both modes),
ORed onto whatever periodic_remove the lines before set (the submit language's self-reference), so a job
that always exits with the code is removed and its node fails. Periodic expressions are evaluated every
PERIODIC_EXPR_INTERVAL (60 s by default), so a fast-looping job may restart a few times more.
"""

from __future__ import annotations

import posixpath
import re

from dagflow.engines.condor import escape
from dagflow.plan.model import Node, StepInfo

# HTCondor file lists are split at commas and white space; quotes would be taken literally.
_LIST_BREAKERS = re.compile(r"[\s,\"']")


def file_list(files: list[str] | tuple[str, ...], what: str) -> str:
    """A `transfer_checkpoint_files` value: the paths joined with ", ", each one a single list entry."""
    for path in files:
        if not path or _LIST_BREAKERS.search(path):
            raise ValueError(f"{what}: {path!r} cannot be one entry of an HTCondor file list")
    return escape.submit_literal(", ".join(files), what)


def _node_files(step: StepInfo, nodes: list[Node]) -> list[str]:
    """The step's checkpoint files as one list for all its nodes (a submit file is per step). A file whose
    name differs between nodes (`ckpt/{region}/`) is named by the directory the names share (`ckpt`): in
    transfer mode each job's scratch directory holds only its own node's files under it."""
    if not nodes:
        return [posixpath.normpath(path) for path in step.checkpoint_files]
    files = []
    for index, template in enumerate(step.checkpoint_files):
        # `dir/` would mean "dir's contents" to HTCondor, landing them in the sandbox's top level
        names = {posixpath.normpath(node.checkpoint_files[index]) for node in nodes}
        if len(names) == 1:
            files.append(names.pop())
            continue
        shared = posixpath.commonpath(sorted(names))
        if not shared:
            raise ValueError(
                f"step {step.name}: checkpoint file {template!r} differs between the step's nodes and shares no "
                "directory; put it in one (e.g. ckpt/{region}/state.pt), which HTCondor transfers whole"
            )
        files.append(shared)
    return list(dict.fromkeys(files))


def checkpoint_lines(step: StepInfo, nodes: list[Node], transfer: bool) -> list[str]:
    """The submit lines for step's checkpointing (none when it does not checkpoint)."""
    code = step.checkpoint_exit_code
    if code is None:
        return []
    if isinstance(code, bool) or not 1 <= int(code) <= 255:
        raise ValueError(f"step {step.name}: checkpoint exit code {code!r} is not 1..255")
    cap = int(step.checkpoint_max_restarts)
    lines = [
        f"checkpoint_exit_code     = {int(code)}",
        "periodic_remove          = ($(periodic_remove:false)) || "
        f"((CheckpointNumber =!= undefined) && (CheckpointNumber >= {cap}))",
    ]
    if transfer:
        files = file_list(_node_files(step, nodes), f"step {step.name} checkpoint files")
        lines += [
            f"transfer_checkpoint_files = {files}",
            "when_to_transfer_output  = ON_EXIT_OR_EVICT",
            "should_transfer_files    = YES",
        ]
    return lines
