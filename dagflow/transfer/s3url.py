"""`s3://bucket/key-or-prefix` locations."""

from __future__ import annotations

import re
from dataclasses import dataclass

from dagflow.transfer.local import TransferError

# S3's bucket naming rules (lowercase, digits, '.', '-'; 3 to 63 characters, letter or digit at the ends)
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


class S3LocationError(TransferError):
    """An s3:// location that cannot name anything."""


@dataclass(frozen=True, slots=True)
class S3Location:
    bucket: str
    key: str  # an object key, or a prefix; "" for the whole bucket

    @property
    def is_prefix(self) -> bool:
        """Written as a directory: the bucket root or a key ending in '/'."""
        return self.key == "" or self.key.endswith("/")

    def as_prefix(self) -> str:
        """The key as a prefix that only matches what is 'under' it."""
        return self.key if self.is_prefix else f"{self.key}/"

    def child(self, relative: str) -> S3Location:
        return S3Location(self.bucket, self.as_prefix() + relative)

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.key}"

    def __str__(self) -> str:
        return self.url


def is_s3_url(text: str) -> bool:
    return text[:5].lower() == "s3://"


def parse_s3_url(text: str) -> S3Location:
    if not is_s3_url(text):
        raise S3LocationError(f"not an s3:// location: {text}")
    rest = text[5:]
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise S3LocationError(f"s3 location has no bucket: {text} (expected s3://bucket/prefix)")
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise S3LocationError(
            f"{bucket!r} is not a valid S3 bucket name in {text} "
            "(3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit)"
        )
    if "//" in key or key.startswith("/"):
        raise S3LocationError(f"s3 location has an empty path segment: {text}")
    if any(part in (".", "..") for part in key.split("/")):
        raise S3LocationError(f"s3 location has a '.' or '..' path segment: {text}")
    return S3Location(bucket, key)
