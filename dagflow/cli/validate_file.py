"""What `dagflow validate` does, without typer: a plain `dagflow validate FILE` runs it before typer is imported
(cli/quick.py); the validate command (cli/spec_cmds.py) runs it once typer has read its options."""

from __future__ import annotations

from pathlib import Path

from dagflow.cli.messages import print_spec_warnings, show_error
from dagflow.errors import DagflowError


def validate_file(pipeline: Path, engine: str | None) -> int:
    """Check pipeline, print every problem (or that it is valid) and its warnings; the exit code."""
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
    return 0
