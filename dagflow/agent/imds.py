"""EC2 instance metadata through IMDSv2: a session token first, then GETs that carry it.

Short timeouts everywhere: off EC2 the link-local address usually does not answer, and boot must not
wait on it. Every read returns None when the value is not there (off EC2, or IMDS disabled). The
timeout is a deadline for a whole request (connect, headers and body): a service that answers but
trickles its reply raises ImdsTimeoutError instead of stalling boot one slow read at a time. An answer
no metadata service gives (more than MAX_ANSWER_BYTES, not UTF-8, JSON nested too deep) raises
ImdsBadAnswerError, naming the request: nothing a service answers is read unbounded or crashes a caller.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any

from dagflow.bounded import BoundedInputError, decode_utf8, loads_json
from dagflow.errors import EXIT_UNREACHABLE, DagflowError

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TOKEN_TTL_S = 21600
METADATA_PATH = "/latest/meta-data/"
# IMDS values are short (an id, a region, a notice of two fields); user-data, up to 16 KiB, is not read.
MAX_ANSWER_BYTES = 64 * 1024


class ImdsError(DagflowError):
    """The metadata service answered, but not usefully."""

    exit_code = EXIT_UNREACHABLE


class ImdsTimeoutError(ImdsError):
    """The metadata service answered, but not within the request deadline."""


class ImdsBadAnswerError(ImdsError):
    """The metadata service answered with something it never sends: too long, not UTF-8, too deep."""


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]


@dataclass(frozen=True, slots=True)
class Ec2Identity:
    instance_id: str
    instance_type: str | None
    region: str | None
    availability_zone: str | None
    lifecycle: str | None  # "spot" or "on-demand" (IMDS: instance-life-cycle)


@dataclass(frozen=True, slots=True)
class SpotNotice:
    action: str  # terminate | stop | hibernate
    time: str  # when EC2 acts, ISO 8601


class Imds:
    def __init__(self, endpoint: str | None = None, timeout_s: float = 1.0) -> None:
        self.endpoint = (endpoint or os.environ.get("DAGFLOW_IMDS_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.timeout_s = timeout_s
        self.disabled = os.environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true"
        self._token: str | None = None
        self._token_expires = 0.0

    def _connection(self) -> http.client.HTTPConnection:
        url = urllib.parse.urlsplit(self.endpoint)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"IMDS endpoint {self.endpoint!r} must be an http:// URL")
        return http.client.HTTPConnection(url.hostname, url.port or 80, timeout=self.timeout_s)

    def _open(self, request: Request) -> tuple[int, bytes]:
        """One request within timeout_s in all; OSError when nothing answers, ImdsTimeoutError when
        the service answers too slowly."""
        connection = self._connection()
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            sock = connection.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes the read blocked on it

        timer = threading.Timer(self.timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            connection.request(request.method, request.path, headers=request.headers)
            response = connection.getresponse()
            body = self._read_body(request, response)
            if expired.is_set():
                raise self._timeout(request)
            return response.status, body
        except (OSError, http.client.HTTPException) as error:
            if expired.is_set():
                raise self._timeout(request) from None
            if isinstance(error, http.client.HTTPException):
                raise OSError(str(error)) from None
            raise
        finally:
            timer.cancel()
            connection.close()

    def _read_body(self, request: Request, response: http.client.HTTPResponse) -> bytes:
        """At most MAX_ANSWER_BYTES, whatever Content-Length says (the client would make room for it all)."""
        if response.length is not None and response.length > MAX_ANSWER_BYTES:
            raise self._too_long(request, str(response.length))
        body = response.read(MAX_ANSWER_BYTES + 1)
        if len(body) > MAX_ANSWER_BYTES:  # no Content-Length: read until the limit
            raise self._too_long(request, f"more than {MAX_ANSWER_BYTES}")
        return body

    def _too_long(self, request: Request, size: str) -> ImdsBadAnswerError:
        return ImdsBadAnswerError(
            f"instance metadata service {self.endpoint}: {request.method} {request.path} answered with {size} "
            f"bytes; an IMDS answer is at most {MAX_ANSWER_BYTES}"
        )

    def _text(self, request: Request, body: bytes) -> str:
        try:
            return decode_utf8(body).strip()
        except BoundedInputError as error:
            raise self._unusable(request, error) from None

    def _unusable(self, request: Request, error: BoundedInputError) -> ImdsBadAnswerError:
        return ImdsBadAnswerError(
            f"instance metadata service {self.endpoint}: {request.method} {request.path}: unusable answer ({error})"
        )

    def _timeout(self, request: Request) -> ImdsTimeoutError:
        return ImdsTimeoutError(
            f"instance metadata service {self.endpoint}: {request.method} {request.path} did not complete "
            f"within {self.timeout_s:g} s (it answers, but too slowly)"
        )

    def token(self) -> str | None:
        if self.disabled:
            return None
        if self._token and time.monotonic() < self._token_expires:
            return self._token
        request = Request("PUT", TOKEN_PATH, {TOKEN_TTL_HEADER: str(TOKEN_TTL_S)})
        try:
            status, body = self._open(request)
        except (OSError, ValueError):  # unreachable, timed out, refused: not on EC2
            return None
        if status != 200 or not body:
            return None
        self._token = self._text(request, body)
        self._token_expires = time.monotonic() + TOKEN_TTL_S - 60
        return self._token

    def get(self, path: str) -> str | None:
        """GET /latest/meta-data/<path>; None on 404, when unreachable, or without a token."""
        for _attempt in range(2):
            token = self.token()
            if token is None:
                return None
            request = Request("GET", METADATA_PATH + path, {TOKEN_HEADER: token})
            try:
                status, body = self._open(request)
            except (OSError, ValueError):
                return None
            if status == 401:  # the token expired early (IMDS restarted): fetch a new one once
                self._token = None
                continue
            return self._text(request, body) if status == 200 else None
        return None

    def get_json(self, path: str) -> dict[str, Any] | None:
        """A JSON object at path; None when absent or not an object; ImdsBadAnswerError when not JSON."""
        text = self.get(path)
        if text is None:
            return None
        try:
            value = loads_json(text)
        except BoundedInputError as error:
            raise self._unusable(Request("GET", METADATA_PATH + path, {}), error) from None
        return value if isinstance(value, dict) else None

    def identity(self) -> Ec2Identity | None:
        instance_id = self.get("instance-id")
        if instance_id is None:
            return None
        return Ec2Identity(
            instance_id=instance_id,
            instance_type=self.get("instance-type"),
            region=self.get("placement/region"),
            availability_zone=self.get("placement/availability-zone"),
            lifecycle=self.get("instance-life-cycle"),
        )

    def spot_notice(self) -> SpotNotice | None:
        notice = self.get_json("spot/instance-action")
        if not notice or "action" not in notice:
            return None
        return SpotNotice(action=str(notice["action"]), time=str(notice.get("time", "")))

    def rebalance_notice(self) -> str | None:
        """The rebalance recommendation's noticeTime, or None while there is none."""
        notice = self.get_json("events/recommendations/rebalance")
        if not notice:
            return None
        return str(notice.get("noticeTime", "unknown time"))
