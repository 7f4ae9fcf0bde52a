"""Which S3 failures are worth retrying, and exponential backoff with jitter between attempts.

botocore retries each request itself (its 'standard' mode: throttling, 5xx and connection errors, with
exponential backoff); this layer retries a whole file when that is not enough, e.g. a connection that
breaks in the middle of a download's body, or a throttling burst that outlasts botocore's attempts.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectionError,
    IncompleteReadError,
    ReadTimeoutError,
    ResponseStreamingError,
)

T = TypeVar("T")

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "SlowDown",
        "ProvisionedThroughputExceededException",
        "BandwidthLimitExceeded",
    }
)
TRANSIENT_CODES = frozenset({"RequestTimeout", "RequestTimeoutException", "InternalError", "ServiceUnavailable"})
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})


class IntegrityError(Exception):
    """What arrived does not match what was announced (size or checksum): fetch it again."""


def causes(error: BaseException) -> list[BaseException]:
    """The error and what caused it: boto3 wraps a ClientError in S3UploadFailedError without `from`."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def error_code(error: BaseException) -> str | None:
    for item in causes(error):
        if isinstance(item, ClientError):
            return str(item.response.get("Error", {}).get("Code") or "") or None
    return None


def is_retryable(error: BaseException) -> bool:
    for item in causes(error):
        if isinstance(item, ClientError):
            code = item.response.get("Error", {}).get("Code")
            status = item.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in THROTTLING_CODES or code in TRANSIENT_CODES or status in TRANSIENT_STATUS:
                return True
        if isinstance(
            item,
            ConnectionError | ConnectionClosedError | ReadTimeoutError | IncompleteReadError | ResponseStreamingError
            | IntegrityError | TimeoutError | ConnectionResetError | BrokenPipeError,
        ):
            return True
        if isinstance(item, BotoCoreError) and "retries exceeded" in str(item).lower():
            return True
    return False


@dataclass(frozen=True, slots=True)
class Backoff:
    attempts: int = 4  # in all, the first included
    base_s: float = 0.5
    cap_s: float = 20.0

    def delay(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)] after the attempt-th failure."""
        return random.uniform(0, min(self.cap_s, self.base_s * (2 ** (attempt - 1))))


def retrying(
    call: Callable[[], T],
    backoff: Backoff,
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    attempt = 1
    while True:
        try:
            return call()
        except Exception as error:
            if attempt >= backoff.attempts or not is_retryable(error):
                raise
            sleep(backoff.delay(attempt))
            attempt += 1
