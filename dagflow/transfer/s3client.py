"""The boto3 S3 client every S3 transfer uses, and what it is configured with.

Credentials come from boto3's standard chain only (environment, shared config and credential files,
profiles, container and instance roles); dagflow never reads, stores or prints them. The endpoint
comes from the standard AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL variables (or the profile's
endpoint_url), which is how tests and demos point it at a local S3 API server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dagflow.errors import DagflowError
from dagflow.transfer.retry import Backoff

MB = 1024 * 1024
MIN_PART_SIZE = 5 * MB  # S3 refuses smaller parts (except the last)


class S3TransferError(DagflowError):
    """S3 said no, or could not be reached: a runtime failure (exit 1), not bad input."""

    exit_code = 1


@dataclass(frozen=True, slots=True)
class TransferOptions:
    jobs: int = 8  # files moved at once
    part_concurrency: int = 4  # parts of one large file moved at once
    multipart_threshold: int = 8 * MB  # files at least this large move in parts
    part_size: int = 8 * MB
    request_attempts: int = 5  # per HTTP request, by botocore (throttling, 5xx, connection errors)
    file_backoff: Backoff = field(default_factory=Backoff)  # per file, by dagflow

    def __post_init__(self) -> None:
        if self.jobs < 1 or self.part_concurrency < 1:
            raise DagflowError("jobs and part concurrency must be at least 1")
        if self.part_size < MIN_PART_SIZE:
            raise DagflowError(f"part size must be at least {MIN_PART_SIZE // MB} MB (S3's minimum)")
        if self.multipart_threshold < MIN_PART_SIZE:
            raise DagflowError(f"multipart threshold must be at least {MIN_PART_SIZE // MB} MB")


def make_client(options: TransferOptions) -> Any:
    import boto3
    from botocore.config import Config

    session = boto3.session.Session()
    if session.get_credentials() is None:
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
    return session.client("s3", config=config)


def transfer_config(options: TransferOptions) -> Any:
    from boto3.s3.transfer import TransferConfig

    return TransferConfig(
        multipart_threshold=options.multipart_threshold,
        multipart_chunksize=options.part_size,
        max_concurrency=options.part_concurrency,
        use_threads=True,
    )
