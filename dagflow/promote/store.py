"""Small reads and atomic writes on S3 or the local filesystem, for pointers and published models."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from dagflow.files import write_atomic
from dagflow.transfer import Location, S3Location, parse_location
from dagflow.transfer.s3 import describe, head
from dagflow.transfer.s3client import S3TransferError, TransferOptions, make_client


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
        location = parse_location(url)
        if isinstance(location, Location):
            try:
                return location.path.read_bytes()
            except FileNotFoundError:
                return None
        try:
            if head(self.client, location.bucket, location.key) is None:
                return None
            return self.client.get_object(Bucket=location.bucket, Key=location.key)["Body"].read()
        except (ClientError, BotoCoreError) as error:
            raise S3TransferError(f"cannot read {location}: {describe(error)}") from None

    def write(self, url: str, data: bytes, content_type: str = "application/json") -> None:
        """Replace a file or object whole: readers see the old content or the new, never a mix."""
        location = parse_location(url)
        if isinstance(location, Location):
            write_atomic(location.path, data)
            return
        try:  # a single PUT: S3 shows the object whole or not at all
            self.client.put_object(Bucket=location.bucket, Key=location.key, Body=data, ContentType=content_type)
        except (ClientError, BotoCoreError) as error:
            raise S3TransferError(f"cannot write {location}: {describe(error)}") from None

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
            raise S3TransferError(f"cannot list {location}: {describe(error)}") from None
        return bool(listing.get("Contents"))


