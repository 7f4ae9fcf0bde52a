"""`dagflow transfer SRC DST`: the implementation of a pipeline's transfer step.

Locations are plain paths or ``file://`` URLs; ``s3://`` is recognised and refused until S3 support
lands. Relative paths are relative to the working directory, which for a pipeline node is the
pipeline file's directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from dagflow.transfer.local import SyncResult, TransferError, sync

__all__ = ["Location", "SyncResult", "TransferError", "parse_location", "transfer"]


@dataclass(frozen=True, slots=True)
class Location:
    path: Path
    is_dir_hint: bool  # written with a trailing slash: "put it in this directory"


def parse_location(text: str) -> Location:
    if not text:
        raise TransferError("empty transfer location")
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme == "s3":
        raise TransferError(f"S3 transfers are not supported yet: {text}")
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise TransferError(f"file URL with a remote host is not supported: {text}")
        raw = unquote(parts.path)
    elif scheme:
        raise TransferError(
            f"unsupported transfer location scheme {scheme!r} in {text} (allowed: plain paths, file://)"
        )
    else:
        raw = text
    if not raw:
        raise TransferError(f"transfer location has no path: {text}")
    return Location(Path(os.path.expanduser(raw)), raw.endswith(("/", os.sep)))


def transfer(src: str, dst: str) -> SyncResult:
    """Copy what is under src into dst (see dagflow.transfer.local for the rules)."""
    source = parse_location(src)
    destination = parse_location(dst)
    src_real, dst_real = source.path.resolve(), destination.path.resolve()
    if src_real == dst_real:
        raise TransferError(f"source and destination are the same path: {source.path}")
    if source.path.is_dir() and dst_real.is_relative_to(src_real):
        raise TransferError(f"destination {destination.path} is inside source directory {source.path}")
    return sync(source.path, destination.path, dst_is_dir=destination.is_dir_hint)
