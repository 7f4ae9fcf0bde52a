"""Small reads and atomic writes on S3 or the local filesystem, for pointers and published models.

Moving a pointer is a compare-and-swap: `read_versioned` returns the content with its version, and
`write_if_unchanged` writes only if the pointer still has that version. On S3 the version is the ETag
and the write is a conditional PUT (If-Match, or If-None-Match: * when there was no pointer), which
S3 evaluates atomically. A local pointer has no ETag; `locked` holds an exclusive lock on a lock file
beside it for the whole read-compare-write, and the write is a temporary file renamed into place.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dagflow.files import write_atomic
from dagflow.transfer import Location, S3Location, parse_location
from dagflow.transfer.retry import error_code
from dagflow.transfer.s3 import s3_error
from dagflow.transfer.s3client import TransferOptions, make_client

# 412: the ETag no longer matches (or the object now exists); 409: a conditional write raced another one;
# 404: the object was deleted since it was read.
_CONFLICT_CODES = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409", "NoSuchKey", "404"})


class PointerConflict(Exception):
    """The pointer changed between our read and our write: read it again and decide again."""


@dataclass(frozen=True, slots=True)
class Versioned:
    data: bytes | None  # None: there is no such file or object
    etag: str | None = None  # S3 only


def lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


class Store:
    """One location's reads and writes; S3 client made on first use."""

    def __init__(self) -> None:
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = make_client(TransferOptions())
        return self._client

    def read(self, url: str) -> bytes | None:
        """The content of a file or object, or None if there is none."""
        return self.read_versioned(url).data

    def read_versioned(self, url: str) -> Versioned:
        location = parse_location(url)
        if isinstance(location, Location):
            try:
                return Versioned(location.path.read_bytes())
            except FileNotFoundError:
                return Versioned(None)
        try:  # one GET: content and ETag of the same version
            response = self.client.get_object(Bucket=location.bucket, Key=location.key)
            return Versioned(response["Body"].read(), response["ETag"])
        except ClientError as error:
            if error_code(error) in ("NoSuchKey", "404", "NotFound"):
                return Versioned(None)
            raise s3_error(f"cannot read {location}", error) from None
        except BotoCoreError as error:
            raise s3_error(f"cannot read {location}", error) from None

    @contextmanager
    def locked(self, url: str) -> Iterator[None]:
        """Hold the pointer's lock (a local pointer only: S3 pointers rely on conditional writes)."""
        location = parse_location(url)
        if not isinstance(location, Location):
            yield
            return
        path = lock_path(location.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            yield
        finally:
            os.close(descriptor)  # releases the lock; the lock file stays, so every process locks the same file

    def write_if_unchanged(self, url: str, data: bytes, seen: Versioned) -> None:
        """Replace the pointer whole, only if it is still what `seen` read; raises PointerConflict if not.

        A local pointer must be written inside `locked`, which makes the check unnecessary."""
        location = parse_location(url)
        if isinstance(location, Location):
            write_atomic(location.path, data)
            return
        condition = {"IfMatch": seen.etag} if seen.data is not None else {"IfNoneMatch": "*"}
        try:
            self.client.put_object(
                Bucket=location.bucket, Key=location.key, Body=data, ContentType="application/json", **condition
            )
        except ClientError as error:
            if error_code(error) in _CONFLICT_CODES:
                raise PointerConflict(str(location)) from None
            raise s3_error(f"cannot write {location}", error) from None
        except BotoCoreError as error:
            raise s3_error(f"cannot write {location}", error) from None

    def has_content(self, url: str) -> bool:
        """Whether a published prefix (or directory) holds anything."""
        location = parse_location(url)
        if isinstance(location, Location):
            return location.path.is_dir() and any(location.path.iterdir())
        return self._has_objects(location)

    def _has_objects(self, location: S3Location) -> bool:
        try:
            listing = self.client.list_objects_v2(Bucket=location.bucket, Prefix=location.as_prefix(), MaxKeys=1)
        except (ClientError, BotoCoreError) as error:
            raise s3_error(f"cannot list {location}", error) from None
        return bool(listing.get("Contents"))
