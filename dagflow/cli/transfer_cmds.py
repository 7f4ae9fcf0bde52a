"""`dagflow transfer`: copy data for a transfer step."""

from __future__ import annotations

import sys

import typer

from dagflow.cli.app import app
from dagflow.cli.common import fail
from dagflow.errors import DagflowError


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


@app.command("transfer")
def transfer_command(
    src: str = typer.Argument(..., help="Source: a path or file:// URL (s3:// is not supported yet)."),
    dst: str = typer.Argument(..., help="Destination directory (or file path, for a file source)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing on success."),
) -> None:
    """Copy what is under SRC into DST, skipping files already there with the same content.

    Writes are atomic (temporary file, then rename), so rerunning an interrupted transfer resumes.
    """
    from dagflow.transfer import transfer

    try:
        result = transfer(src, dst)
    except DagflowError as error:
        fail(error)
    except OSError as error:
        print(f"error: transfer {src} -> {dst} failed: {error}", file=sys.stderr)
        raise typer.Exit(1) from error
    if not quiet:
        print(
            f"transfer {src} -> {dst}: copied {result.copied}, skipped {result.skipped}, "
            f"{human_bytes(result.bytes_copied)} copied, {human_bytes(result.bytes_skipped)} unchanged"
        )
