"""Racing `dagflow promote` processes on one pointer: the best model always ends as `latest`.

Each round starts a dozen real `python -m dagflow promote` processes that wait at a start line (a file
the test creates), so their read-compare-write windows overlap. On S3 a proxy in front of the S3 server (SeaweedFS)
also holds the first reads of the pointer until every process has read it: all of them decide against
the same old pointer, which is the worst case for a compare-and-swap.
"""

from __future__ import annotations

import http.client
import json
import random
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import boto3
import pytest

RACERS = 12
BUCKET = "dagflow-race"
POINTER_KEY = "models/us/latest"

# `dagflow promote ...` as `python -m dagflow` runs it, with the slow start (imports, building the command
# line parser) done before the start line, so that the processes reach the pointer close together.
START_LINE = """\
import os, sys, time
import typer.main
import dagflow.cli, dagflow.promote.promote, dagflow.transfer.s3
command = typer.main.get_command(dagflow.cli.app)
go = sys.argv[1]
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.0005)
command.main(args=sys.argv[2:], prog_name="dagflow")
"""


@dataclass
class RaceProxy:
    """Forwards to the S3 server. Holds the first `hold_reads` GETs of the pointer until all have arrived
    (or a time limit passes). PUTs go straight through: SeaweedFS, like S3, evaluates If-Match /
    If-None-Match and writes in one atomic step (24 racing conditional PUTs on one ETag: exactly one
    succeeded in each of 20 rounds), so the compare-and-swap is the server's, not the proxy's."""

    upstream: str
    hold_reads: int = 0
    url: str = ""
    reads: int = 0
    all_read: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def arm(self, count: int) -> None:
        with self.lock:
            self.hold_reads, self.reads = count, 0
            self.all_read.clear()

    def wait_for_the_others(self) -> None:
        with self.lock:
            if self.reads >= self.hold_reads:
                return
            self.reads += 1
            if self.reads == self.hold_reads:
                self.all_read.set()
        self.all_read.wait(60)


def _forward(upstream: str, handler: BaseHTTPRequestHandler, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    parts = urlsplit(upstream)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    headers = {k: v for k, v in handler.headers.items() if k.lower() not in ("connection", "keep-alive")}
    connection.request(handler.command, handler.path, body=body, headers=headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, response.getheaders(), payload


def _handler(proxy: RaceProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def _handle(self) -> None:
            key = unquote(urlsplit(self.path).path).lstrip("/").partition("/")[2]
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if key == POINTER_KEY and self.command == "GET":
                proxy.wait_for_the_others()
            status, headers, payload = _forward(proxy.upstream, self, body)
            self.send_response_only(status)
            for name, value in headers:
                if name.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                    self.send_header(name, value)
            length = dict((k.lower(), v) for k, v in headers).get("content-length") if self.command == "HEAD" else None
            self.send_header("Content-Length", length or str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _handle

    return Handler


@pytest.fixture
def race_proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[RaceProxy]:
    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    state = RaceProxy(upstream=s3_endpoint)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", state.url)
    yield state
    state.all_read.set()
    server.shutdown()
    server.server_close()


def race(tmp_path: Path, name: str, pointer: str, models: dict[str, float]) -> list[subprocess.CompletedProcess[str]]:
    """Promote every model (name -> val_loss) to the pointer at once; the results of all processes."""
    round_dir = tmp_path / name
    round_dir.mkdir()
    go = round_dir / "go"
    processes = []
    for index, (model, loss) in enumerate(models.items()):
        metrics = round_dir / f"metrics-{index}.json"
        metrics.write_text(json.dumps({"val_loss": loss}))
        argv = ["promote", "--metrics", str(metrics), "--metric", "val_loss", "--better", "lower", "--than", pointer,
                "--model", model, "--run-id", Path(model.rstrip("/")).name, "--node", "evaluate.promote"]
        processes.append(subprocess.Popen([sys.executable, "-c", START_LINE, str(go), *argv], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
    go.write_text("")
    results = []
    for process in processes:
        out, err = process.communicate(timeout=180)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def losses(count: int, seed: int) -> list[float]:
    values = [round(0.1 + 0.01 * index, 2) for index in range(count)]
    random.Random(seed).shuffle(values)
    return values


def check_round(results: list[subprocess.CompletedProcess[str]], pointer: dict, best_model: str) -> None:
    for result in results:
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
    assert pointer["model"] == best_model, f"the best model must win: {pointer['metrics']}"


@pytest.mark.slow
def test_racing_promotions_to_a_directory_pointer_keep_the_best(tmp_path: Path) -> None:
    pointer = tmp_path / "models" / "latest"
    for round_index, start in enumerate((None, 0.205, None)):
        models = {}
        for index, loss in enumerate(losses(RACERS, seed=round_index)):
            model = tmp_path / "models" / f"r{round_index}-{index}"
            model.mkdir(parents=True)
            (model / "model.txt").write_text(str(loss))
            models[str(model) + "/"] = loss
        if start is not None:
            pointer.write_text(json.dumps({"format": 1, "model": "old/", "metrics": {"val_loss": start}}))
            models = {model: loss + 0.05 for model, loss in models.items()}  # some worse, some better than start
        results = race(tmp_path, f"round{round_index}", str(pointer), models)
        best = min(models, key=models.__getitem__)
        check_round(results, json.loads(pointer.read_text()), best)
    names = {path.name for path in pointer.parent.iterdir() if path.name.startswith(".latest")}
    assert names == {".latest.lock"}, "no temporary pointer files are left behind"


@pytest.mark.slow
def test_racing_promotions_to_an_s3_pointer_keep_the_best(
    race_proxy: RaceProxy, s3_endpoint: str, tmp_path: Path
) -> None:
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    for round_index, start in enumerate((None, 0.205, None)):
        models = {}
        for index, loss in enumerate(losses(RACERS, seed=10 + round_index)):
            prefix = f"models/us/r{round_index}-{index}/"
            client.put_object(Bucket=BUCKET, Key=prefix + "model.txt", Body=str(loss).encode())
            models[f"s3://{BUCKET}/{prefix}"] = loss
        if start is not None:
            body = json.dumps({"format": 1, "model": "old/", "metrics": {"val_loss": start}}).encode()
            client.put_object(Bucket=BUCKET, Key=POINTER_KEY, Body=body)
            models = {model: loss + 0.05 for model, loss in models.items()}
        race_proxy.arm(RACERS)
        results = race(tmp_path, f"round{round_index}", f"s3://{BUCKET}/{POINTER_KEY}", models)
        pointer = json.loads(client.get_object(Bucket=BUCKET, Key=POINTER_KEY)["Body"].read())
        check_round(results, pointer, min(models, key=models.__getitem__))
