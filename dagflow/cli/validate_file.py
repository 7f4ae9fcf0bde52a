"""What `dagflow validate` does, without typer: a plain `dagflow validate FILE` runs it before typer is imported
(cli/quick.py); the validate command (cli/spec_cmds.py) runs it once typer has read its options."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dagflow.cli.messages import print_spec_warnings, show_error
from dagflow.errors import DagflowError

if TYPE_CHECKING:
    from dagflow.plan.model import Node, Plan


# What no cache key can see, said once under --explain (docs/operations.md, "Caching", says the same at length).
NOT_TRACKED = (
    "not tracked by any cache key: the environment dagflow runs in (PATH, installed packages, variables not "
    "in env:), modules imported by a computed name, shell variables ($DATA), files a program opens by a name "
    "its command does not spell, and s3:// URLs a command reads itself: declare such files under inputs:, "
    "or use --force STEP"
)


def validate_file(pipeline: Path, engine: str | None, explain: bool = False) -> int:
    """Check pipeline, print every problem (or that it is valid) and its warnings; the exit code. explain: also
    what each step's cache key tracks, for the step's first node, and what no key can see."""
    from dagflow.engines.registry import spec_checks
    from dagflow.plan.expand import expand
    from dagflow.run.resources.auto import AutoResources
    from dagflow.search.checks import check_search
    from dagflow.spec import load_spec

    try:
        spec = load_spec(pipeline, spec_checks(engine))  # with an engine, also what only that engine cannot run
        check_search(spec, str(pipeline))  # what `dagflow search run` would refuse
        plan = expand(spec, run_id="validate", resolve=AutoResources(spec).resolve)
    except DagflowError as error:
        show_error(error)
        return error.exit_code
    print_spec_warnings(spec, engine)
    print(f"{pipeline}: valid — {len(plan.steps)} steps, {len(plan.nodes)} nodes")
    if explain:
        for line in tracked_lines(plan):
            print(line)
    return 0


def tracked_lines(plan: Plan) -> list[str]:
    """Per step, what its first node's cache key covers beyond its command, env, params and upstream: the files
    it declares and the files its command runs (plan/script_files.py finds them, as the runner does)."""
    from dagflow.plan.script_files import ScriptFiles, transfer_source

    scripts = ScriptFiles(Path(plan.workdir))
    first: dict[str, Node] = {}
    for node in plan.nodes.values():
        first.setdefault(node.step, node)
    lines = []
    for step, node in first.items():
        runs = scripts.of(node)
        copies = transfer_source(plan, node)
        source = f"; its source {copies} (files by content, S3 by key, size and ETag)" if copies is not None else ""
        lines.append(
            f"step {step} ({node.name}): command, env, params and upstream; inputs: {', '.join(node.inputs) or '-'}; "
            f"files its command runs: {', '.join(runs) or '-'}{source}"
        )
    return [*lines, NOT_TRACKED]
