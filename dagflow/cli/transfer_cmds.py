"""`dagflow transfer`, `dagflow publish` and `dagflow promote`: moving data and model artifacts."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from dagflow.cli.common import checked_run_id, fail
from dagflow.cli.root import app
from dagflow.errors import DagflowError
from dagflow.transfer.progress import human_bytes

JobsOption = Annotated[int, typer.Option("--jobs", "-j", min=1, help="Files moved at once (S3).")]
PartSizeOption = Annotated[
    str, typer.Option("--part-size", help="Part size for multipart S3 transfers (at least 5MB).")
]
ThresholdOption = Annotated[
    str, typer.Option("--multipart-threshold", help="Files at least this large move in parts (S3).")
]
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help="No progress line, and nothing printed on success.")]


def transfer_options(jobs: int, part_size: str, threshold: str):  # -> TransferOptions
    from dagflow.spec.units import parse_size_mb
    from dagflow.transfer.s3client import MB, TransferOptions

    try:
        return TransferOptions(
            jobs=jobs, part_size=parse_size_mb(part_size) * MB, multipart_threshold=parse_size_mb(threshold) * MB
        )
    except ValueError as error:
        raise DagflowError(f"bad size: {error}") from None


def report_os_error(what: str, error: OSError) -> None:
    from dagflow.transfer.redact import redact

    print(f"error: {redact(f'{what} failed: {error}')}", file=sys.stderr)
    raise typer.Exit(1) from None


@app.command("transfer")
def transfer_command(
    src: str = typer.Argument(..., help="Source: a path, file:// URL or s3://bucket/prefix."),
    dst: str = typer.Argument(..., help="Destination directory (or file path, for a file source), or s3:// prefix."),
    quiet: QuietOption = False,
    jobs: JobsOption = 8,
    part_size: PartSizeOption = "8MB",
    multipart_threshold: ThresholdOption = "8MB",
) -> None:
    """Copy what is under SRC into DST, skipping what is already there with the same content.

    Either side may be on S3 (s3://bucket/prefix); credentials come from the standard AWS chain and
    the endpoint from AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL when set. Writes are atomic (temporary
    file then rename; an S3 object appears whole or not at all), so rerunning an interrupted transfer
    resumes; it also aborts the unfinished multipart uploads a killed earlier run left for the same keys.
    Exit status: 0 done, 1 a copy failed, 2 bad input (including AWS settings that cannot work: endpoint,
    region, profile, partial credentials), 3 S3 could not be reached.
    """
    from dagflow.transfer import transfer
    from dagflow.transfer.progress import Progress

    progress = Progress(f"transfer {src} -> {dst}", enabled=not quiet)
    try:
        result = transfer(src, dst, options=transfer_options(jobs, part_size, multipart_threshold), progress=progress)
    except DagflowError as error:
        progress.close()
        fail(error)
    except OSError as error:
        progress.close()
        report_os_error(f"transfer {src} -> {dst}", error)
    progress.close()
    if not quiet:
        print(
            f"transfer {src} -> {dst}: copied {result.copied}, skipped {result.skipped}, "
            f"{human_bytes(result.bytes_copied)} copied, {human_bytes(result.bytes_skipped)} unchanged"
        )


@app.command("publish")
def publish_command(
    dest: Annotated[str, typer.Argument(help="Where the outputs go: s3://bucket/prefix/ or a directory.")],
    outputs: Annotated[list[str], typer.Argument(help="The step's output files and directories.")],
    quiet: QuietOption = False,
) -> None:
    """Upload a train step's outputs to its `publish:` location (what a <step>.publish node runs).

    A file lands at DEST/<name>; a directory's contents land under DEST. Unchanged files are skipped.
    """
    from dagflow.promote.publish import publish
    from dagflow.transfer.progress import Progress

    progress = Progress(f"publish -> {dest}", enabled=not quiet)
    try:
        result = publish(dest, outputs, progress)
    except DagflowError as error:
        progress.close()
        fail(error)
    except OSError as error:
        progress.close()
        report_os_error(f"publish to {dest}", error)
    progress.close()
    if not quiet:
        print(f"published {len(outputs)} outputs to {dest}: copied {result.copied}, skipped {result.skipped}")


class Better(StrEnum):
    lower = "lower"
    higher = "higher"


@app.command("promote")
def promote_command(
    metrics: Annotated[str, typer.Option("--metrics", help="The new model's metrics file (JSON).")],
    metric: Annotated[str, typer.Option("--metric", help="The metric to compare.")],
    better: Annotated[Better, typer.Option("--better", help="Which way is better.")],
    than: Annotated[str, typer.Option("--than", help="The pointer to the current model (s3:// or a path).")],
    model: Annotated[str, typer.Option("--model", help="Where the new model was published.")],
    run_id: Annotated[
        str, typer.Option("--run-id", help="The run that made the new model.", callback=checked_run_id)
    ],
    node: Annotated[str, typer.Option("--node", help="This promotion's node name (names its verdict file).")],
    min_delta: Annotated[float, typer.Option("--min-delta", min=0, help="Required improvement.")] = 0.0,
) -> None:
    """Move the pointer to the new model only if its metric beats the current model's (a <step>.promote node).

    The verdict (promoted, kept or failed, with both metrics) goes to stdout and, in a run, to
    $DAGFLOW_RUN_DIR/promotions/<node>.json for the run summary. Racing promotions of one pointer are
    safe: the pointer moves by compare-and-swap, so the best model wins. Exit status: 0 promoted or kept,
    1 failed (S3 errors: worth a retry), 2 bad input (a metric that is missing, not a number, infinite
    or too large; bad AWS settings), 3 S3 could not be reached.
    """
    import math
    import os

    from dagflow.promote.promote import Request, failed, promote
    from dagflow.run.promotions import write_verdict
    from dagflow.transfer.redact import redact

    request = Request(metrics, metric, better.value, than, model, run_id, node, min_delta)
    code = 0
    try:
        if not math.isfinite(min_delta):
            raise DagflowError(f"--min-delta must be a finite number, not {min_delta}")
        verdict = promote(request)
    except DagflowError as error:
        verdict, code = failed(request, redact(str(error))), error.exit_code
    except OSError as error:
        verdict, code = failed(request, redact(str(error))), 1
    run_dir = os.environ.get("DAGFLOW_RUN_DIR")
    if run_dir:
        write_verdict(Path(run_dir), verdict)
    print(f"{node}: {verdict.verdict}: {verdict.reason}", file=sys.stderr if code else sys.stdout)
    raise typer.Exit(code)
