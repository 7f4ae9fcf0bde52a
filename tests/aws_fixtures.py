"""Fixtures for the agent and autoscaler tests: a real AWS API server (moto_server) on a loopback port,
and an instance metadata service (IMDSv2) on another. Loaded through tests/conftest.py's pytest_plugins."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from s3_server import START_LIMIT_S, answers


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def moto_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`moto_server` as a real subprocess on a free loopback port, for the whole session."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"  # its own output, shown if it does not come up
    log = log_path.open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    # Wait for the server itself: it answers or it exits. The limit is a safety net only (moto imports
    # for seconds, and far longer on a loaded machine), the one tests/s3_server.py uses.
    deadline = time.monotonic() + START_LIMIT_S
    while not answers(f"{url}/moto-api/"):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            process.wait()
            log.close()
            output = log_path.read_text(errors="replace")
            pytest.fail(f"moto_server did not start (exit {process.returncode}); its output:\n{output}")
        time.sleep(0.1)
    yield url
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
    log.close()


@pytest.fixture
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A clean AWS account on the moto server; boto3 gets dummy credentials."""
    request = urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST")
    # A safety net only: a reset answers in milliseconds, but far later on a loaded machine (load 26: > 5 s).
    urllib.request.urlopen(request, timeout=START_LIMIT_S).close()
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_endpoint


def create_asg(endpoint: str, region: str, name: str, instance_type: str, max_size: int, min_size: int = 0) -> None:
    """An Auto Scaling group backed by a launch template, the way a site would set one up."""
    import boto3

    ec2 = boto3.client("ec2", region_name=region, endpoint_url=endpoint)
    template = f"lt-{name}"
    # A fixed AMI id and zone names: describing moto's image catalogue costs seconds per test.
    ec2.create_launch_template(
        LaunchTemplateName=template, LaunchTemplateData={"ImageId": "ami-12c6146b", "InstanceType": instance_type}
    )
    zones = [f"{region}a", f"{region}b"]
    boto3.client("autoscaling", region_name=region, endpoint_url=endpoint).create_auto_scaling_group(
        AutoScalingGroupName=name,
        LaunchTemplate={"LaunchTemplateName": template},
        MinSize=min_size,
        MaxSize=max_size,
        DesiredCapacity=min_size,
        AvailabilityZones=zones,
    )


@dataclass
class ImdsState:
    """What the fake instance metadata service serves; tests change it while it runs."""

    metadata: dict[str, str] = field(
        default_factory=lambda: {
            "instance-id": "i-0123456789abcdef0",
            "instance-type": "p4de.24xlarge",
            "placement/region": "us-east-1",
            "placement/availability-zone": "us-east-1b",
            "instance-life-cycle": "spot",
        }
    )
    spot_action: dict[str, Any] | None = None
    rebalance: dict[str, Any] | None = None
    tokens: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # method, path, status


def _handler(state: ImdsState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: str = "") -> None:
            state.requests.append((self.command, self.path, status))
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:
            ttl = self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            if self.path != "/latest/api/token":
                return self._send(404)
            if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return self._send(400)
            token = secrets.token_urlsafe(24)
            state.tokens.add(token)
            return self._send(200, token)

        def do_GET(self) -> None:
            if self.headers.get("X-aws-ec2-metadata-token") not in state.tokens:
                return self._send(401)  # IMDSv2 required: no IMDSv1 answers
            prefix = "/latest/meta-data/"
            if not self.path.startswith(prefix):
                return self._send(404)
            path = self.path[len(prefix) :]
            if path == "spot/instance-action":
                return self._send(200, json.dumps(state.spot_action)) if state.spot_action else self._send(404)
            if path == "events/recommendations/rebalance":
                return self._send(200, json.dumps(state.rebalance)) if state.rebalance else self._send(404)
            if path in state.metadata:
                return self._send(200, state.metadata[path])
            return self._send(404)

    return Handler


@pytest.fixture
def imds() -> Iterator[tuple[str, ImdsState]]:
    """An IMDSv2 server on a loopback port: (endpoint, mutable state)."""
    state = ImdsState()
    with serve_on_loopback(_handler(state)) as endpoint:
        yield endpoint, state


@contextlib.contextmanager
def serve_on_loopback(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """An HTTP server on a free loopback port, in a thread, for the with-block: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def fake_condor_drain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> Path:
    """A `condor_drain` first on PATH running `script`, a sh script template ({log}: the log file it writes,
    {flag}: a file it may use as state); the log's path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "drain.log"
    command = bin_dir / "condor_drain"
    command.write_text(script.format(log=log, flag=tmp_path / "draining"))
    command.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.fixture
def no_imds(monkeypatch: pytest.MonkeyPatch) -> str:
    """An endpoint where nothing listens: what a host off EC2 sees (connection refused)."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("DAGFLOW_IMDS_ENDPOINT", endpoint)
    return endpoint
