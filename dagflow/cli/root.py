"""The typer application every command module registers on (cli/commands.py), with its --version."""

from __future__ import annotations

from typing import Annotated

import typer

from dagflow.cli.quick import package_version

app = typer.Typer(
    name="dagflow",
    help=(
        "Run ML pipelines as workflow DAGs.\n\n"
        "Typical flow: `dagflow validate pipeline.yaml`, `dagflow plan pipeline.yaml`, then either "
        "`dagflow run pipeline.yaml` (on this machine) or `dagflow compile pipeline.yaml -o DIR` "
        "(HTCondor DAGMan files)."
    ),
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"dagflow {package_version()}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass
