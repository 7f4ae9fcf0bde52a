"""`dagflow publish DEST OUTPUT...`: upload a train node's outputs to its `publish:` location.

A file output lands at DEST/<its name>; a directory output's contents land under DEST, as
`dagflow transfer DIR DEST/` puts them. Two outputs that would land on the same name are refused.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.transfer import SyncResult, TransferError, transfer
from dagflow.transfer.local import _source_files
from dagflow.transfer.progress import Progress


def landing_names(outputs: list[str]) -> dict[str, str]:
    """Where each output's files land, relative to DEST -> the output they come from."""
    names: dict[str, str] = {}
    for output in outputs:
        path = Path(output)
        if path.is_dir():
            relatives = [relative.as_posix() for relative in _source_files(path)]
        elif path.is_file():
            relatives = [path.name]
        else:
            raise TransferError(f"output {output} does not exist: did the step write it?")
        for relative in relatives:
            if relative in names:
                raise TransferError(f"outputs {names[relative]} and {output} would both publish {relative!r}")
            names[relative] = output
    return names


def publish(dest: str, outputs: list[str], progress: Progress | None = None) -> SyncResult:
    if not outputs:
        raise TransferError("nothing to publish: the step lists no outputs")
    landing_names(outputs)
    target = dest if dest.endswith("/") else dest + "/"
    total = SyncResult()
    for output in outputs:
        result = transfer(output, target, progress=progress)
        total.copied += result.copied
        total.skipped += result.skipped
        total.bytes_copied += result.bytes_copied
        total.bytes_skipped += result.bytes_skipped
    return total
