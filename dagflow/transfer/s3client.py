"""The boto3 S3 client every S3 transfer uses, and what it is configured with.

Credentials come from boto3's standard chain only (environment, shared config and credential files,
profiles, container and instance roles); dagflow never reads, stores or prints them. The endpoint
comes from the standard AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL variables (or the profile's
endpoint_url), which is how tests and demos point it at a local S3 API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from dagflow.errors import EXIT_UNREACHABLE, DagflowError
from dagflow.transfer.redact import redact
from dagflow.transfer.retry import Backoff

MB = 1024 * 1024
MIN_PART_SIZE = 5 * MB  # S3 refuses smaller parts (except the last)
# An unfinished multipart upload begun longer ago than this is stale, whoever began it (see s3.py): days
# longer than any one upload runs, as an S3 lifecycle rule's AbortIncompleteMultipartUpload would set.
STALE_UPLOAD_AGE_S = 7 * 24 * 3600.0


class S3TransferError(DagflowError):
    """S3 said no, or could not be reached: a runtime failure (exit 1), not bad input."""

    exit_code = 1


class S3UnreachableError(S3TransferError):
    """No connection to the S3 endpoint could be made: a network or endpoint problem (exit 3)."""

    exit_code = EXIT_UNREACHABLE


class S3ConfigError(DagflowError):
    """The AWS settings cannot work (endpoint, region, profile, credentials): bad input (exit 2)."""


ENDPOINT_SOURCES = "AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL or the profile's endpoint_url"


@dataclass(frozen=True, slots=True)
class TransferOptions:
    jobs: int = 8  # files moved at once
    part_concurrency: int = 4  # parts of one large file moved at once
    multipart_threshold: int = 8 * MB  # files at least this large move in parts
    part_size: int = 8 * MB
    request_attempts: int = 5  # per HTTP request, by botocore (throttling, 5xx, connection errors)
    file_backoff: Backoff = field(default_factory=Backoff)  # per file, by dagflow
    stale_upload_age_s: float = STALE_UPLOAD_AGE_S  # others' unfinished uploads older than this are aborted

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.part_concurrency < 1:
            raise DagflowError("jobs and part concurrency must be at least 1")
        if self.part_size < MIN_PART_SIZE:
            raise DagflowError(f"part size must be at least {MIN_PART_SIZE // MB} MB (S3's minimum)")
        if self.multipart_threshold < MIN_PART_SIZE:
            raise DagflowError(f"multipart threshold must be at least {MIN_PART_SIZE // MB} MB")
        if self.stale_upload_age_s < 0:
            raise DagflowError("the stale upload age cannot be negative")


def make_client(options: TransferOptions) -> Any:
    """An S3 client; AWS settings that cannot work raise S3ConfigError with one redacted line."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError

    try:
        session = boto3.session.Session()
        credentials = session.get_credentials()
    except BotoCoreError as error:  # e.g. ProfileNotFound, PartialCredentialsError
        raise S3ConfigError(f"bad AWS settings: {_one_line(error)}") from None
    if credentials is None:
        raise S3TransferError(
            "no AWS credentials found (looked in the standard places: environment variables, "
            "~/.aws/credentials and config profiles, container and instance roles)"
        )
    config = Config(
        retries={"mode": "standard", "total_max_attempts": options.request_attempts},
        max_pool_connections=max(10, options.jobs * options.part_concurrency),
        connect_timeout=10,
        read_timeout=60,
    )
    try:
        client = session.client("s3", config=config)
    except BotoCoreError as error:  # e.g. InvalidRegionError (a ValueError too, so caught first)
        raise S3ConfigError(f"bad AWS settings: {_one_line(error)}") from None
    except ValueError as error:  # botocore's "Invalid endpoint: <url>"
        raise S3ConfigError(f"bad S3 endpoint ({ENDPOINT_SOURCES}): {_one_line(error)}") from None
    check_endpoint(client.meta.endpoint_url)
    return client


def check_endpoint(url: str) -> None:
    """Refuse an endpoint botocore accepts but cannot connect to (a port out of range, no host)."""
    try:
        parts = urlsplit(url)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port is None or parts.port > 0)
    except ValueError:
        valid = False
    if not valid:
        raise S3ConfigError(f"bad S3 endpoint ({ENDPOINT_SOURCES}): {redact(url)} is not an http(s) URL with a host")


def _one_line(error: BaseException) -> str:
    return redact(" ".join(str(error).split()))


def transfer_config(options: TransferOptions) -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=options.multipart_threshold,
        multipart_chunksize=options.part_size,
        max_concurrency=options.part_concurrency,
        use_threads=True,
    )
