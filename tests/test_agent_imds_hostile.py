"""IMDS answers no real metadata service gives (not UTF-8, a notice nested 10,000 levels deep, a
Content-Length of a terabyte): `agent configure` exits 3 with a message naming the service and the
path, and `agent watch` logs them and keeps watching, so a real notice that comes later is drained.
A real loopback server gives the answers; a recording condor_drain on PATH stands in for HTCondor's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from aws_fixtures import fake_condor_drain, serve_on_loopback
from typer.testing import CliRunner

from dagflow.agent.imds import Imds
from dagflow.agent.watch import CondorDrainer, Watcher
from dagflow.cli import app

SPOT = "/latest/meta-data/spot/instance-action"
REBALANCE = "/latest/meta-data/events/recommendations/rebalance"
NOTICE = b'{"action": "terminate", "time": "2026-11-23T01:02:00Z"}'
NOT_UTF8 = b'{"action": "termin\xe9", "time": "2026-11-23T01:02:00Z"}'
DEEP = b'{"action": "terminate", "time": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
HUGE_LENGTH = 10**12  # the client must not try to make room for it


@dataclass
class Answer:
    body: bytes
    length: int | None = None  # the Content-Length sent; None: len(body); -1: none (the body ends at close)


@dataclass
class HostileState:
    answers: dict[str, Answer] = field(default_factory=dict)  # path -> answer; others 404


def _handler(state: HostileState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, answer: Answer) -> None:
            self.send_response(status)
            length = len(answer.body) if answer.length is None else answer.length
            if length >= 0:
                self.send_header("Content-Length", str(length))
            self.end_headers()
            with contextlib.suppress(OSError):  # the client gave up on the answer: it may
                self.wfile.write(answer.body)
            self.close_connection = True

        def do_PUT(self) -> None:
            self._send(200, state.answers.get(self.path, Answer(b"token")))

        def do_GET(self) -> None:
            answer = state.answers.get(self.path)
            self._send(200, answer) if answer is not None else self._send(404, Answer(b""))

    return Handler


@pytest.fixture
def hostile_imds() -> Iterator[tuple[str, HostileState]]:
    state = HostileState()
    with serve_on_loopback(_handler(state)) as endpoint:
        yield endpoint, state


@pytest.fixture
def condor_drain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_condor_drain(tmp_path, monkeypatch, '#!/bin/sh\necho "$*" >> "{log}"\n')


HOSTILE = {
    "not-utf8": (Answer(NOT_UTF8), "not UTF-8 text (byte 0xe9)"),
    "deep": (Answer(DEEP), "nested deeper than"),
    "huge-length": (Answer(b"{", length=HUGE_LENGTH), f"{HUGE_LENGTH} bytes"),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_spot_notice_is_logged_and_the_watcher_drains_the_next_real_one(
    hostile_imds: tuple[str, HostileState], condor_drain: Path, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    endpoint, state = hostile_imds
    answer, expected = HOSTILE[kind]
    state.answers[SPOT] = answer
    watcher = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-1.example"))
    caplog.set_level("INFO", logger="dagflow.agent")
    assert watcher.poll() == []
    assert f"{endpoint}: GET {SPOT}" in caplog.text and expected in caplog.text
    assert not condor_drain.exists()

    state.answers[SPOT] = Answer(NOTICE)
    done = watcher.poll()
    assert len(done) == 1 and "condor_drain -quick" in done[0] and "ok" in done[0]
    assert condor_drain.read_text().startswith("-quick -reason dagflow agent: EC2 spot interruption notice")


def test_a_hostile_spot_notice_does_not_hide_a_rebalance_recommendation(
    hostile_imds: tuple[str, HostileState], condor_drain: Path
) -> None:
    endpoint, state = hostile_imds
    state.answers[SPOT] = Answer(DEEP)
    state.answers[REBALANCE] = Answer(b'{"noticeTime": "2026-11-23T01:00:00Z"}')
    done = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-1.example")).poll()
    assert len(done) == 1 and "condor_drain -graceful" in done[0]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_cli_watch_survives_a_hostile_answer(
    hostile_imds: tuple[str, HostileState], condor_drain: Path, kind: str
) -> None:
    endpoint, state = hostile_imds
    state.answers[SPOT] = HOSTILE[kind][0]
    result = CliRunner().invoke(
        app, ["agent", "watch", "--imds-endpoint", endpoint, "--machine", "m", "--iterations", "2", "--interval", "0.1"]
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None
    assert not condor_drain.exists()


CONFIGURE_HOSTILE = {
    "not-utf8": (Answer(b"i-0123\xff"), "not UTF-8 text (byte 0xff)"),
    "huge-length": HOSTILE["huge-length"],
    "too-long": (Answer(b"i" * 100_000), "answered with 100000 bytes"),
}


@pytest.mark.parametrize("kind", sorted(CONFIGURE_HOSTILE))
@pytest.mark.parametrize("path", ["/latest/api/token", "/latest/meta-data/instance-id"])
def test_cli_configure_refuses_a_hostile_answer_with_exit_3(
    hostile_imds: tuple[str, HostileState], tmp_path: Path, kind: str, path: str
) -> None:
    endpoint, state = hostile_imds
    answer, expected = CONFIGURE_HOSTILE[kind]
    state.answers[path] = answer
    result = CliRunner().invoke(
        app,
        ["agent", "configure", "--dry-run", "-c", "cm.example.org", "--config-dir", str(tmp_path / "c"),
         "--imds-endpoint", endpoint],
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    method = "PUT" if path.endswith("token") else "GET"
    assert f"error: instance metadata service {endpoint}: {method} {path}" in result.stderr
    assert expected in result.stderr
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("with_length", [True, False], ids=["content-length", "until-close"])
def test_a_reply_of_exactly_the_limit_is_read_and_one_byte_more_is_not(
    hostile_imds: tuple[str, HostileState], with_length: bool
) -> None:
    from dagflow.agent.imds import MAX_ANSWER_BYTES, ImdsError

    endpoint, state = hostile_imds
    path = "/latest/meta-data/instance-type"
    length = None if with_length else -1
    state.answers[path] = Answer(b"x" * MAX_ANSWER_BYTES, length)
    assert Imds(endpoint).get("instance-type") == "x" * MAX_ANSWER_BYTES
    state.answers[path] = Answer(b"x" * (MAX_ANSWER_BYTES + 1), length)
    size = MAX_ANSWER_BYTES + 1 if with_length else f"more than {MAX_ANSWER_BYTES}"
    with pytest.raises(ImdsError, match=f"GET {path} answered with {size} bytes"):
        Imds(endpoint).get("instance-type")
