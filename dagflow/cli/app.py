"""The typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="dagflow",
    help=(
        "Run ML pipelines as workflow DAGs.\n\n"
        "Typical flow: `dagflow validate pipeline.yaml`, `dagflow plan pipeline.yaml`, then either "
        "`dagflow run pipeline.yaml` (on this machine) or `dagflow compile pipeline.yaml -o DIR` "
        "(HTCondor DAGMan files)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
