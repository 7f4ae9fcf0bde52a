"""S3 transfers against a real S3 API server (SeaweedFS on loopback, tests/s3_server.py), through a recording proxy that
can inject faults: throttling, truncated bodies, and requests that hang until the client is killed."""

from __future__ import annotations

import hashlib
import http.client
import io
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from dagflow.transfer import transfer
from dagflow.transfer.local import PARTIAL_SUFFIX
from dagflow.transfer.progress import Progress
from dagflow.transfer.redact import redact
from dagflow.transfer.retry import Backoff, IntegrityError, is_retryable, retrying
from dagflow.transfer.s3 import SHA256_METADATA, S3TransferError, safe_relative
from dagflow.transfer.s3client import MB, TransferOptions

BUCKET = "dagflow-test"
SMALL = TransferOptions(jobs=4, multipart_threshold=5 * MB, part_size=5 * MB)
SLOWDOWN = b"<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    key: str  # the object key ("" for bucket-level requests)
    query: str

    @property
    def is_object_write(self) -> bool:
        return self.method == "PUT" and bool(self.key)

    @property
    def is_object_read(self) -> bool:
        return self.method == "GET" and bool(self.key)


Rule = Callable[[Request], str | None]  # -> None (pass), "slowdown", "truncate", "hold", "pause"


@dataclass
class FaultProxy:
    """Forwards to the S3 server; records every request and what it answered; applies the rules."""

    upstream: str
    url: str = ""
    rules: list[Rule] = field(default_factory=list)
    log: list[tuple[Request, str]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, request: Request, outcome: str) -> None:
        with self.lock:
            self.log.append((request, outcome))

    def outcomes(self, predicate: Callable[[Request], bool]) -> list[tuple[str, str]]:
        with self.lock:
            return [(request.key, outcome) for request, outcome in self.log if predicate(request)]

    def reset(self) -> None:
        with self.lock:
            self.rules.clear()
            self.log.clear()


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    upstream = urlsplit(proxy.upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            bucket_and_key = unquote(parts.path).lstrip("/").split("/", 1)
            request = Request(self.command, bucket_and_key[1] if len(bucket_and_key) > 1 else "", parts.query)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            action = next((a for rule in proxy.rules if (a := rule(request)) is not None), None)
            if action == "slowdown":
                proxy.record(request, "503")
                self.send_response_only(503)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(SLOWDOWN)))
                self.end_headers()
                self.wfile.write(SLOWDOWN)
                return
            if action == "pause":  # wait for the test's go-ahead (proxy.release), then pass the request on
                proxy.record(request, "paused")
                proxy.release.wait(60)
            if action == "hold" and request.method != "GET":
                proxy.record(request, "held")
                proxy.release.wait(60)
                self.close_connection = True
                return
            connection = http.client.HTTPConnection(upstream.hostname, upstream.port, timeout=30)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("connection", "keep-alive")}
            connection.request(self.command, self.path, body=body, headers=headers)
            response = connection.getresponse()
            payload = response.read()
            connection.close()
            self.send_response_only(response.status)
            for name, value in response.getheaders():
                if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                    self.send_header(name, value)
            length = response.getheader("Content-Length") if self.command == "HEAD" else str(len(payload))
            self.send_header("Content-Length", length or "0")
            self.end_headers()
            if self.command == "HEAD":
                proxy.record(request, str(response.status))
                return
            if action in ("truncate", "hold") and len(payload) > 1:
                self.wfile.write(payload[: len(payload) // 2])  # a body cut short, as by a dropped connection
                self.wfile.flush()
                proxy.record(request, "truncated" if action == "truncate" else "held")
                if action == "hold":
                    proxy.release.wait(60)
                self.close_connection = True
                return
            self.wfile.write(payload)
            proxy.record(request, str(response.status))

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    return Handler


@pytest.fixture
def proxy(
    s3_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FaultProxy]:
    """An empty bucket on the S3 server (SeaweedFS), AWS_ENDPOINT_URL pointing at a fault proxy in front of it,
    and a state directory of the test's own (XDG_STATE_HOME: the journals of uploads, which the CLI processes
    share)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    state = FaultProxy(upstream=s3_endpoint)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", state.url)
    yield state
    state.release.set()
    server.shutdown()
    server.server_close()


def s3(s3_endpoint: str):  # the test's own view of the bucket, straight to the server (not through the proxy)
    return boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")


def make_tree(root: Path, count: int = 6, size: int = 50_000, big: int = 0) -> dict[str, bytes]:
    files = {f"f{index:02d}.bin": os.urandom(size) for index in range(count)}
    files["nested/deep/notes.txt"] = b"hello\n"
    if big:
        files["big.bin"] = os.urandom(big)
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return files


def local_tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def remote_tree(s3_endpoint: str, prefix: str) -> dict[str, bytes]:
    client = s3(s3_endpoint)
    listing = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix) :]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing}


@pytest.mark.slow
def test_upload_then_download_copies_everything_and_skips_what_is_unchanged(
    proxy: FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    files = make_tree(tmp_path / "src", big=11 * MB)
    first = transfer(str(tmp_path / "src"), f"s3://{BUCKET}/data/", options=SMALL)
    assert (first.copied, first.skipped) == (len(files), 0)
    assert remote_tree(s3_endpoint, "data/") == files
    head = s3(s3_endpoint).head_object(Bucket=BUCKET, Key="data/big.bin")
    assert head["ETag"].strip('"').endswith("-3"), "the large file went up in parts"
    assert head["Metadata"][SHA256_METADATA] == hashlib.sha256(files["big.bin"]).hexdigest()

    proxy.reset()
    again = transfer(str(tmp_path / "src") + "/", f"s3://{BUCKET}/data/", options=SMALL)
    assert (again.copied, again.skipped) == (0, len(files))
    assert proxy.outcomes(lambda r: r.is_object_write or r.method == "POST") == []

    (tmp_path / "src/f01.bin").write_bytes(os.urandom(50_000))  # same size, new content
    changed = transfer(str(tmp_path / "src"), f"s3://{BUCKET}/data", options=SMALL)
    assert (changed.copied, changed.skipped) == (1, len(files) - 1)

    proxy.reset()
    down = transfer(f"s3://{BUCKET}/data/", str(tmp_path / "dst"), options=SMALL)
    assert down.copied == len(files)
    assert local_tree(tmp_path / "dst") == local_tree(tmp_path / "src")
    assert {key for key, _ in proxy.outcomes(lambda r: r.is_object_read)} == {f"data/{k}" for k in files}
    assert oct((tmp_path / "dst/f00.bin").stat().st_mode & 0o777) != oct(0o600), "not left private like a temp file"

    proxy.reset()
    down_again = transfer(f"s3://{BUCKET}/data/", str(tmp_path / "dst"), options=SMALL)
    assert (down_again.copied, down_again.skipped) == (0, len(files))
    assert proxy.outcomes(lambda r: r.is_object_read) == [], "unchanged objects are not downloaded again"


@pytest.mark.slow
def test_single_objects_and_objects_uploaded_by_other_tools(
    proxy: FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    s3(s3_endpoint).put_object(Bucket=BUCKET, Key="other/model.json", Body=b'{"a": 1}')  # no dagflow checksum
    first = transfer(f"s3://{BUCKET}/other/model.json", str(tmp_path / "in") + "/")
    assert first.copied == 1
    assert (tmp_path / "in/model.json").read_bytes() == b'{"a": 1}'
    second = transfer(f"s3://{BUCKET}/other/model.json", str(tmp_path / "in/model.json"))
    assert second.skipped == 1, "a single-part ETag is the MD5: unchanged"
    up = transfer(str(tmp_path / "in/model.json"), f"s3://{BUCKET}/copy/renamed.json")
    assert up.copied == 1
    assert remote_tree(s3_endpoint, "copy/") == {"renamed.json": b'{"a": 1}'}


@pytest.mark.slow
def test_throttling_and_cut_connections_are_retried(proxy: FaultProxy, s3_endpoint: str, tmp_path: Path) -> None:
    files = make_tree(tmp_path / "src", count=4)
    seen: set[tuple[str, str]] = set()

    def throttle_first(request: Request) -> str | None:
        if (request.is_object_write or request.is_object_read) and (request.method, request.key) not in seen:
            seen.add((request.method, request.key))
            return "slowdown" if request.method == "PUT" else "truncate"
        return None

    proxy.rules.append(throttle_first)
    up = transfer(str(tmp_path / "src"), f"s3://{BUCKET}/data/", options=SMALL)
    assert up.copied == len(files)
    assert remote_tree(s3_endpoint, "data/") == files
    writes = proxy.outcomes(lambda r: r.is_object_write)
    for key in files:
        assert [outcome for k, outcome in writes if k == f"data/{key}"] == ["503", "200"]

    down = transfer(f"s3://{BUCKET}/data/", str(tmp_path / "dst"), options=SMALL)
    assert down.copied == len(files)
    assert local_tree(tmp_path / "dst") == files
    reads = proxy.outcomes(lambda r: r.is_object_read)
    for key in files:
        assert next(outcome for k, outcome in reads if k == f"data/{key}") == "truncated"
    assert not list((tmp_path / "dst").rglob(f"*{PARTIAL_SUFFIX}"))


def test_throttling_that_never_ends_fails_cleanly_after_the_retries(
    proxy: FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    make_tree(tmp_path / "src", count=3)
    proxy.rules.append(lambda r: "slowdown" if r.is_object_write and r.key.endswith("f01.bin") else None)
    options = TransferOptions(jobs=2, request_attempts=2, file_backoff=Backoff(attempts=2, base_s=0.01))
    with pytest.raises(S3TransferError, match=r"1 of 4 files failed .*\n.*f01.bin: SlowDown") as caught:
        transfer(str(tmp_path / "src"), f"s3://{BUCKET}/data/", options=options)
    assert caught.value.exit_code == 1
    assert len([1 for key, _ in proxy.outcomes(lambda r: r.is_object_write) if key == "data/f01.bin"]) == 2 * 2
    assert set(remote_tree(s3_endpoint, "data/")) == {"f00.bin", "f02.bin", "nested/deep/notes.txt"}


def run_cli(*args: str, **kwargs) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "dagflow", "transfer", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


CLI_OPTIONS = ("--jobs", "2", "--multipart-threshold", "5MB", "--part-size", "5MB")
LATE = {f"f{index:02d}.bin" for index in range(5, 8)}  # requests for these hang until the kill


@pytest.mark.slow
def test_upload_killed_midway_resumes_without_corruption_or_recopying(
    proxy: FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    files = make_tree(tmp_path / "src", count=8, big=11 * MB)

    def hang(request: Request) -> str | None:
        if request.is_object_write and request.key.split("/")[-1] in LATE:
            return "hold"
        if request.key == "data/big.bin" and "partNumber=2" in request.query:
            return "hold"
        return None

    proxy.rules.append(hang)
    first = run_cli(str(tmp_path / "src"), f"s3://{BUCKET}/data/", *CLI_OPTIONS)
    early = {f"data/f{index:02d}.bin" for index in range(5)}
    wait_for(lambda: early <= {k for k, o in proxy.outcomes(lambda r: r.is_object_write) if o == "200"}, "early files")
    wait_for(lambda: len(proxy.outcomes(lambda r: True)) and any(
        o == "held" and "f0" in k for k, o in proxy.outcomes(lambda r: r.is_object_write)), "a hanging upload")
    first.send_signal(signal.SIGKILL)
    first.communicate()

    # What is visible is complete: every object there has its file's content and checksum.
    visible = remote_tree(s3_endpoint, "data/")
    assert set(visible) >= {k.removeprefix("data/") for k in early}
    assert "big.bin" not in visible, "a multipart upload that did not finish is not an object"
    assert not LATE & set(visible)
    for key, content in visible.items():
        assert content == files[key]
    assert s3(s3_endpoint).list_multipart_uploads(Bucket=BUCKET).get("Uploads"), "the killed upload left its parts"

    proxy.reset()
    second = run_cli(str(tmp_path / "src"), f"s3://{BUCKET}/data/", *CLI_OPTIONS)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert f"skipped {len(visible)}" in out
    rewritten = {key.removeprefix("data/") for key, _ in proxy.outcomes(lambda r: r.is_object_write)}
    assert rewritten == set(files) - set(visible), "only what was missing went up again"
    assert remote_tree(s3_endpoint, "data/") == files
    assert not s3(s3_endpoint).list_multipart_uploads(Bucket=BUCKET).get("Uploads"), "stale parts are cleaned up"


@pytest.mark.slow
def test_download_killed_midway_resumes_without_corruption_or_recopying(
    proxy: FaultProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    files = make_tree(tmp_path / "src", count=8)
    assert transfer(str(tmp_path / "src"), f"s3://{BUCKET}/data/").copied == len(files)
    proxy.reset()
    proxy.rules.append(lambda r: "hold" if r.is_object_read and r.key.split("/")[-1] in LATE else None)
    dst = tmp_path / "dst"
    first = run_cli(f"s3://{BUCKET}/data/", str(dst), *CLI_OPTIONS)
    wait_for(lambda: any(o == "held" for _, o in proxy.outcomes(lambda r: r.is_object_read)), "a hanging download")
    wait_for(lambda: list(dst.glob(f"*{PARTIAL_SUFFIX}")), "a partial file")
    first.send_signal(signal.SIGKILL)
    first.communicate()

    complete = {name: data for name, data in local_tree(dst).items() if not name.endswith(PARTIAL_SUFFIX)}
    assert complete, "some files finished before the kill"
    assert not LATE & set(complete), "nothing incomplete sits under its final name"
    for name, data in complete.items():
        assert data == files[name]

    proxy.reset()
    second = run_cli(f"s3://{BUCKET}/data/", str(dst), *CLI_OPTIONS)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert f"skipped {len(complete)}" in out
    fetched = {key.removeprefix("data/") for key, _ in proxy.outcomes(lambda r: r.is_object_read)}
    assert fetched == set(files) - set(complete), "only what was missing came down again"
    assert local_tree(dst) == files, "partial files are gone and everything is whole"


@pytest.mark.slow
def test_credentials_never_appear_in_output(proxy: FaultProxy, s3_endpoint: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    secret, key_id = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYzz", "AKIAIOSFODNN7ZZZZZZZ"
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", secret)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key_id)
    make_tree(tmp_path / "src", count=2)
    unreachable = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    transfers = [  # run one after another: the download reads what the upload wrote
        ((str(tmp_path / "src"), f"s3://{BUCKET}/data/"), None),
        ((f"s3://{BUCKET}/data/", str(tmp_path / "dst")), None),
        (("s3://no-such-bucket/x/", str(tmp_path / "dst")), None),
        ((f"s3://{BUCKET}/data/", str(tmp_path / "d2")), unreachable),
    ]
    codes = []
    for args, env in transfers:
        process = run_cli(*args, env=env)
        out, err = process.communicate(timeout=60)
        codes.append(process.returncode)
        assert secret not in out + err and key_id not in out + err
        assert "Traceback" not in err
    assert codes == [0, 0, 1, 3], "unreachable is exit 3"
    assert redact(f"https://{key_id}:{secret}@host/x?X-Amz-Signature=abc") == "https://***@host/x?X-Amz-Signature=***"


def test_bad_object_keys_and_missing_sources(proxy: FaultProxy, s3_endpoint: str, tmp_path: Path) -> None:
    with pytest.raises(S3TransferError, match="cannot be written as a local path"):
        safe_relative("data/../../etc/passwd", "data/")
    with pytest.raises(S3TransferError, match="nothing to copy"):
        transfer(f"s3://{BUCKET}/empty/", str(tmp_path / "dst"))
    with pytest.raises(S3TransferError, match="NoSuchBucket"):
        transfer(str(tmp_path), "s3://no-such-bucket/x/")


def test_retry_classification_and_progress_line() -> None:
    throttled = ClientError({"Error": {"Code": "SlowDown"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "PutObject")
    denied = ClientError({"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}}, "PutObject")
    assert is_retryable(throttled) and is_retryable(EndpointConnectionError(endpoint_url="http://x"))
    assert is_retryable(IntegrityError("short")) and not is_retryable(denied)
    try:
        try:
            raise throttled
        except ClientError:
            raise RuntimeError("Failed to upload") from None  # boto3 style: the cause kept as context
    except RuntimeError as wrapped:
        wrapped.__context__ = throttled
        assert is_retryable(wrapped)
    calls, sleeps = [], []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise throttled
        return "ok"

    assert retrying(flaky, Backoff(attempts=4, base_s=1, cap_s=3), sleep=sleeps.append) == "ok"
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 1 and 0 <= sleeps[1] <= 2
    stream = io.StringIO()
    progress = Progress("transfer a -> s3://b/", stream, interval_s=0)
    progress.set_total(2, 2048)
    progress.bytes_moved(1024)
    progress.file_done()
    assert "transfer a -> s3://b/: 1/2 files, 1.0 KB/2.0 KB" in stream.getvalue().splitlines()[-1]
