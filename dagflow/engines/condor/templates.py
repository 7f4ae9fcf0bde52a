"""Finding and filling the per-kind submit templates (`submit/<kind>.sub`).

They are found by dagflow.data.data_dir: the DAGFLOW_SUBMIT_TEMPLATES override, the package's
dagflow/_data/submit (hatch force-include), or the repository root's
submit/ in a source checkout.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from dagflow.data import data_dir

FIELD = re.compile(r"\{\{([A-Za-z_]+)\}\}")
# Lines that are nothing but one block field; dropped when the block is empty.
# A template without the line is refused when the step has something for it (it would be lost).
BLOCK_FIELDS = frozenset({"gpus", "attributes", "policy", "transfer", "runtime"})
FIELDS = (
    frozenset(
        {
            "workdir",
            "log_dir",
            "log_name",
            "event_log",
            "request_cpus",
            "request_memory",
            "request_disk",
            "request_gpus",
            "requirements",
            "pipeline",
            "run_id",
            "step",
            "kind",
            "runtime_env",
            "universe",
            "executable",
            "transfer_executable",
            "should_transfer_files",
        }
    )
    | BLOCK_FIELDS
)
REQUIRED_MACROS = ("$(DagflowArgs)", "$(DagflowEnv)")


def template_dir() -> Path:
    """The directory holding <kind>.sub templates: DAGFLOW_SUBMIT_TEMPLATES, the installed copy, or the checkout's."""
    return data_dir("submit")


@cache
def load_template(kind: str, directory: Path | None = None) -> str:
    path = (directory or template_dir()) / f"{kind}.sub"
    if not path.is_file():
        raise ValueError(f"no submit template for step kind {kind!r}: expected {path}")
    text = path.read_text(encoding="utf-8")
    check_template(text, str(path))
    return text


def check_template(text: str, where: str) -> None:
    body = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        for match in FIELD.finditer(line):
            if match.group(1) not in FIELDS:
                raise ValueError(f"{where}:{number}: unknown template field {match.group(0)}")
    for macro in REQUIRED_MACROS:
        if not any(macro in line for line in body):
            raise ValueError(f"{where}: the template must use {macro} (it carries each node's values)")
    if not body or body[-1].strip().lower() != "queue":
        raise ValueError(f"{where}: the template must end with a single `queue` line")
    if sum(1 for line in body if line.strip().lower().startswith("queue")) != 1:
        raise ValueError(f"{where}: a DAG node's submit description must queue exactly one job")


def fill(text: str, fields: dict[str, str], header: list[str]) -> str:
    """Replace {{field}} on non-comment lines; drop the template's leading comment block."""
    lines = text.splitlines()
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith("#")):
        lines.pop(0)
    out = list(header)
    placed = set()
    for line in lines:
        if line.lstrip().startswith("#"):
            out.append(line)
            continue
        stripped = line.strip()
        if stripped.startswith("{{") and stripped.endswith("}}") and stripped[2:-2] in BLOCK_FIELDS:
            placed.add(stripped[2:-2])
            block = fields[stripped[2:-2]]
            if block:
                out.append(block)
            continue
        out.append(FIELD.sub(lambda match: fields[match.group(1)], line))
    _check_blocks_placed(fields, placed)
    return "\n".join(out) + "\n"


def _check_blocks_placed(fields: dict[str, str], placed: set[str]) -> None:
    for name in sorted(BLOCK_FIELDS - placed):
        if fields.get(name):
            first = fields[name].splitlines()[0]
            raise ValueError(
                f"the submit template has no {{{{{name}}}}} line (on a line of its own), so `{first}` "
                "would be lost: add the line to the template"
            )
