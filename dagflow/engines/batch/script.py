"""The lines of a batch script that run nodes through the node wrapper (node.py), for Slurm and Grid Engine.

A script runs one node, or one node per array task: `case "$<task variable>" in <task>) exec wrapper ...`.
Every value is one shell word (shell_word); the job id is the one shell expansion (`$SLURM_JOB_ID`, `$JOB_ID`).

Each line of a script is one dagflow wrote: a value never starts a line of its own. sbatch reads `#SBATCH`
(also `#PBS`, `#BSUB`) lines up to the first command and qsub reads `#$` lines anywhere in the file, so a
line break inside a comment, or even inside a quoted argument, would let a value run as shell or be read
as a directive. A value with a control character is therefore written in bash's `$'...'` form, with
every such character as `\\xHH` bytes.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagflow.data import IMPORT_ROOT
from dagflow.errors import DagflowError
from dagflow.plan import DAGFLOW_LAUNCHER, Node, Plan, StepInfo
from dagflow.run.layout import RunLayout
from dagflow.run.usage import requested_of
from dagflow.text import CONTROL_CHARACTERS

KILL_GRACE_S = 10
SINGLE = -1  # the task id of a unit that is one node, not an array


# What a plain single-quoted word cannot hold on one line: control characters, and lone surrogates (the
# undecodable bytes of a file name, under surrogateescape).
_UNSAFE = re.compile(rf"{CONTROL_CHARACTERS.pattern}|[\ud800-\udfff]")
_ESCAPED_IN_ANSI_C = re.compile(rf"{_UNSAFE.pattern}|['\\]")


class JobScriptError(DagflowError):
    """A value no job script can carry (exit code 2)."""


def shell_word(value: str) -> str:
    """value as one bash word that fits on one line, read back by bash as exactly value."""
    if not _UNSAFE.search(value):
        return shlex.quote(value)
    if "\x00" in value:
        raise JobScriptError(
            f"{value!r} contains a NUL character, which no command line, environment or path can carry"
        )
    return "$'" + _ESCAPED_IN_ANSI_C.sub(lambda match: _ansi_c(match.group(), value), value) + "'"


def _ansi_c(char: str, value: str) -> str:
    if char in "'\\":
        return "\\" + char
    try:
        raw = char.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise JobScriptError(f"{value!r} contains {char!r}, a lone surrogate that no file can hold") from None
    return "".join(f"\\x{byte:02x}" for byte in raw)  # bytes, so bash reads it the same in every locale


def shell_line(words: list[str]) -> str:
    return " ".join(shell_word(word) for word in words)


@dataclass(frozen=True, slots=True)
class CancelMarker:
    """The file `dagflow cancel` writes a submission's number to before it signals that submission's jobs."""

    path: Path
    submission: int


def node_argv(node: Node, step: StepInfo | None = None) -> list[str]:
    """A node running dagflow itself runs this interpreter's dagflow (see the environment set below); a
    step's runtime.python replaces its command's `python`."""
    if node.argv and node.argv[0] == DAGFLOW_LAUNCHER:
        return [sys.executable, "-m", "dagflow", *node.argv[1:]]
    return step.runtime.argv(list(node.argv)) if step is not None else list(node.argv)


def environment(plan: Plan, run_dir: Path) -> list[str]:
    """What every node's script exports, as the local engine gives it to a node."""
    bin_dir = os.path.dirname(sys.executable)
    return [
        f"export DAGFLOW_RUN_ID={shell_word(plan.run_id)}",
        f"export DAGFLOW_RUN_DIR={shell_word(str(run_dir))}",
        # Like the local engine: `python` and `dagflow` in a node are the submitter's virtualenv's.
        f'export PATH={shell_word(bin_dir)}:"$PATH"',
        f"export PYTHONPATH={shell_word(IMPORT_ROOT)}${{PYTHONPATH:+:$PYTHONPATH}}",
    ]


def wrapper_command(
    plan: Plan, step: StepInfo, node: Node, run_dir: Path, job_ref: str, parents: bool, cancel: CancelMarker | None
) -> str:
    """`exec python -m dagflow.engines.batch.node ... -- argv`; job_ref is a shell expression (not quoted).
    parents: the wrapper checks that the node's parents succeeded before running it. cancel: where
    `dagflow cancel` marks this submission cancelled (records.py)."""
    layout = RunLayout.from_run_dir(run_dir)
    words = [
        sys.executable, "-m", "dagflow.engines.batch.node",
        "--journal", str(layout.journal_path),
        "--logs", str(layout.logs_dir),
        "--node", node.name,
        "--workdir", str(Path(plan.workdir).absolute()),
        "--retries", str(step.retries),
        "--timeout", str(step.timeout_s or 0),
        "--grace", str(KILL_GRACE_S),
    ]  # fmt: skip
    if step.retry_unless_exit:
        words += ["--unless-exit", ",".join(str(code) for code in step.retry_unless_exit)]
    words += ["--step", step.name]  # the step and request go into the node's usage records
    words += [f"--request={key}={value:g}" for key, value in requested_of(step.resources).items()]
    if step.checkpoint_exit_code is not None:
        words += ["--checkpoint-exit", str(step.checkpoint_exit_code)]
        words += ["--max-restarts", str(step.checkpoint_max_restarts)]
    for key, value in node.env.items():
        words += ["--env", f"{key}={value}"]
    if parents:
        for parent in node.parents:
            words += ["--parent", parent]
    if cancel is not None:
        words += ["--cancel-marker", str(cancel.path), "--submission", str(cancel.submission)]
    return f'exec {shell_line(words)} --job "{job_ref}" -- {shell_line(node_argv(node, step))}'


def job_script(
    plan: Plan,
    step: StepInfo,
    tasks: dict[int, str],
    run_dir: Path,
    submitted_with: tuple[str, list[str]],
    ids: tuple[str, str],
    parents: bool,
    cancel: CancelMarker | None,
) -> str:
    """The script of one job or job array: a header saying how it was submitted (command, argv), the
    environment, and each node's wrapper command. ids: the job reference (a shell expression) and the
    variable holding the array task id."""
    command, argv = submitted_with
    job_ref, task_variable = ids
    header = [
        "#!/bin/bash",
        f"# dagflow run {shell_word(plan.run_id)}, step {shell_word(step.name)}: {len(tasks)} node(s). Submitted with:",
        f"#   {command} {shell_line(argv)}",
        *environment(plan, run_dir),
    ]

    def command_for(name: str) -> str:
        return wrapper_command(plan, step, plan.nodes[name], run_dir, job_ref, parents=parents, cancel=cancel)

    return "\n".join([*header, *dispatch(task_variable, tasks, command_for), ""])


def dispatch(task_variable: str, tasks: dict[int, str], command_for: Callable[[str], str]) -> list[str]:
    """The script's body: the one node's command, or a case over the array task id."""
    if list(tasks) == [SINGLE]:
        return [command_for(tasks[SINGLE])]
    body = [f'case "${task_variable}" in']
    body += [f"{task}) {command_for(name)} ;;" for task, name in tasks.items()]
    body += [f'*) echo "dagflow: no node for array task ${task_variable}" >&2; exit 1 ;;', "esac"]
    return body
