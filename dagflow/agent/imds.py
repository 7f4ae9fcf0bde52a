"""EC2 instance metadata through IMDSv2: a session token first, then GETs that carry it.

Short timeouts everywhere: off EC2 the link-local address usually does not answer, and boot must not
wait on it. Every read returns None when the value is not there (off EC2, or IMDS disabled).
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

DEFAULT_ENDPOINT = "http://169.254.169.254"
TOKEN_PATH = "/latest/api/token"
TOKEN_TTL_HEADER = "X-aws-ec2-metadata-token-ttl-seconds"
TOKEN_HEADER = "X-aws-ec2-metadata-token"
TOKEN_TTL_S = 21600


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

    def _open(self, request: urllib.request.Request) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, b""

    def token(self) -> str | None:
        if self.disabled:
            return None
        if self._token and time.monotonic() < self._token_expires:
            return self._token
        request = urllib.request.Request(
            self.endpoint + TOKEN_PATH, method="PUT", headers={TOKEN_TTL_HEADER: str(TOKEN_TTL_S)}
        )
        try:
            status, body = self._open(request)
        except (OSError, ValueError):  # unreachable, timed out, refused: not on EC2
            return None
        if status != 200 or not body:
            return None
        self._token = body.decode().strip()
        self._token_expires = time.monotonic() + TOKEN_TTL_S - 60
        return self._token

    def get(self, path: str) -> str | None:
        """GET /latest/meta-data/<path>; None on 404, when unreachable, or without a token."""
        for _attempt in range(2):
            token = self.token()
            if token is None:
                return None
            request = urllib.request.Request(f"{self.endpoint}/latest/meta-data/{path}", headers={TOKEN_HEADER: token})
            try:
                status, body = self._open(request)
            except (OSError, ValueError):
                return None
            if status == 401:  # the token expired early (IMDS restarted): fetch a new one once
                self._token = None
                continue
            return body.decode().strip() if status == 200 else None
        return None

    def get_json(self, path: str) -> dict[str, Any] | None:
        text = self.get(path)
        if text is None:
            return None
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            return None
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
