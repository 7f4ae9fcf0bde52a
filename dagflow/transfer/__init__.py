"""`dagflow transfer SRC DST`: the implementation of a pipeline's transfer step.

Locations are plain paths, ``file://`` URLs or ``s3://bucket/prefix``. Local to local, S3 to local and
local to S3 are supported; S3 to S3 is refused (stage through a local directory). Relative paths are
relative to the working directory, which for a pipeline node is the pipeline file's directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from dagflow.transfer.local import SyncResult, TransferError, sync
from dagflow.transfer.progress import Progress
from dagflow.transfer.s3url import S3Location, is_s3_url, parse_s3_url

if TYPE_CHECKING:  # boto3 is imported only when an S3 transfer runs
    from dagflow.transfer.s3client import TransferOptions

__all__ = ["Location", "S3Location", "SyncResult", "TransferError", "parse_location", "transfer"]


@dataclass(frozen=True, slots=True)
class Location:
    path: Path
    is_dir_hint: bool  # written with a trailing slash: "put it in this directory"


def parse_location(text: str) -> Location | S3Location:
    if not text:
        raise TransferError("empty transfer location")
    if is_s3_url(text):
        return parse_s3_url(text)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme == "file":
        parts = urlsplit(text)
        if parts.netloc not in ("", "localhost"):
            raise TransferError(f"file URL with a remote host is not supported: {text}")
        raw = unquote(parts.path)
    elif scheme:
        raise TransferError(
            f"unsupported transfer location scheme {scheme!r} in {text} (allowed: plain paths, file://, s3://)"
        )
    else:
        raw = text
    if not raw:
        raise TransferError(f"transfer location has no path: {text}")
    return Location(Path(os.path.expanduser(raw)), raw.endswith(("/", os.sep)))


def transfer(
    src: str, dst: str, *, options: TransferOptions | None = None, progress: Progress | None = None
) -> SyncResult:
    """Copy what is under src into dst (see dagflow.transfer.local and dagflow.transfer.s3 for the rules).

    options and progress apply to S3 transfers (defaults, and no progress line, when None).
    """
    source = parse_location(src)
    destination = parse_location(dst)
    if isinstance(source, S3Location) or isinstance(destination, S3Location):
        return _s3_transfer(source, destination, options, progress or Progress("", enabled=False))
    src_real, dst_real = source.path.resolve(), destination.path.resolve()
    if src_real == dst_real:
        raise TransferError(f"source and destination are the same path: {source.path}")
    if source.path.is_dir() and dst_real.is_relative_to(src_real):
        raise TransferError(f"destination {destination.path} is inside source directory {source.path}")
    return sync(source.path, destination.path, dst_is_dir=destination.is_dir_hint)


def _s3_transfer(
    source: Location | S3Location,
    destination: Location | S3Location,
    options: TransferOptions | None,
    progress: Progress,
) -> SyncResult:
    from dagflow.transfer import s3
    from dagflow.transfer.s3client import TransferOptions

    opts = options or TransferOptions()
    if isinstance(source, S3Location) and isinstance(destination, S3Location):
        raise TransferError(
            f"copying from {source} to {destination} is not supported: both are on S3; stage through a local directory"
        )
    if isinstance(source, S3Location):
        assert isinstance(destination, Location)
        return s3.download(
            source, destination.path, dst_is_dir=destination.is_dir_hint, options=opts, progress=progress
        )
    assert isinstance(destination, S3Location)
    return s3.upload(source.path, destination, options=opts, progress=progress)
