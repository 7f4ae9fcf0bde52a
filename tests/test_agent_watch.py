"""`dagflow agent watch`: IMDS notices -> condor_drain (a recording stand-in on PATH, with the startd's
"already draining" rule), each notice acted on once."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_fixtures import ImdsState, fake_condor_drain
from typer.testing import CliRunner

from dagflow.agent.imds import Imds
from dagflow.agent.watch import CondorDrainer, Watcher
from dagflow.cli import app

FAKE_DRAIN = """#!/bin/sh
echo "$*" >> "{log}"
if [ "$1" = "-cancel" ]; then rm -f "{flag}"; exit 0; fi
if [ -e "{flag}" ]; then echo "Drain failed: machine is already draining" >&2; exit 1; fi
touch "{flag}"
echo "Sent request to drain the startd on $last"
"""


@pytest.fixture
def condor_drain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return fake_condor_drain(tmp_path, monkeypatch, FAKE_DRAIN)


def test_no_notice_no_action(imds: tuple[str, ImdsState], condor_drain: Path) -> None:
    endpoint, state = imds
    watcher = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-1.example"))
    assert watcher.run(interval_s=0, iterations=3, sleep=lambda _: None) == []
    assert not condor_drain.exists()
    assert ("GET", "/latest/meta-data/spot/instance-action", 404) in state.requests


def test_rebalance_then_spot_notice(
    imds: tuple[str, ImdsState], condor_drain: Path, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint, state = imds
    watcher = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-1.example"))
    caplog.set_level("INFO", logger="dagflow.agent")
    state.rebalance = {"noticeTime": "2026-11-23T01:00:00Z"}
    first = watcher.poll()
    assert len(first) == 1 and "condor_drain -graceful" in first[0] and "ok" in first[0]

    state.spot_action = {"action": "terminate", "time": "2026-11-23T01:02:00Z"}
    second = watcher.poll()
    assert len(second) == 1  # the spot notice escalates; the same rebalance notice is not repeated
    assert "condor_drain -quick" in second[0] and "ok" in second[0]
    assert watcher.poll() == []  # each notice once
    calls = condor_drain.read_text().splitlines()
    assert calls[0].startswith("-graceful -reason dagflow agent: EC2 rebalance recommendation")
    assert calls[0].endswith("gpu-1.example")
    # The startd refuses a second drain while draining: cancel, then drain quickly.
    assert calls[1].startswith("-quick") and calls[2] == "-cancel gpu-1.example" and calls[3].startswith("-quick")
    assert "spot interruption notice (terminate at 2026-11-23T01:02:00Z)" in caplog.text


def test_spot_notice_alone_drains_quickly(imds: tuple[str, ImdsState], condor_drain: Path) -> None:
    endpoint, state = imds
    state.spot_action = {"action": "stop", "time": "2026-11-23T02:00:00Z"}
    watcher = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-2.example"))
    assert "condor_drain -quick" in watcher.poll()[0]
    state.rebalance = {"noticeTime": "2026-11-23T02:00:05Z"}
    assert "already draining (quick)" in watcher.poll()[0]
    assert len(condor_drain.read_text().splitlines()) == 1


def test_without_htcondor_tools_it_says_so(imds: tuple[str, ImdsState], tmp_path: Path) -> None:
    endpoint, state = imds
    state.spot_action = {"action": "terminate", "time": "t"}
    drainer = CondorDrainer(machine="m", which=lambda _: None)
    assert "nothing drained" in Watcher(Imds(endpoint), drainer).poll()[0]


def test_cli_watch(imds: tuple[str, ImdsState], condor_drain: Path) -> None:
    endpoint, state = imds
    state.spot_action = {"action": "terminate", "time": "2026-11-23T03:00:00Z"}
    result = CliRunner().invoke(
        app,
        ["agent", "watch", "--imds-endpoint", endpoint, "--machine", "gpu-3", "--iterations", "1"],
    )
    assert result.exit_code == 0, result.output
    assert condor_drain.read_text().startswith("-quick -reason dagflow agent: EC2 spot interruption notice")
    bad = CliRunner().invoke(app, ["agent", "watch", "--on-interruption", "slowly", "--iterations", "1"])
    assert bad.exit_code == 2 and "expected one of graceful, quick, fast" in bad.stderr


FAILS_ONCE = """#!/bin/sh
echo "$*" >> "{log}"
if [ ! -e "{flag}" ]; then
  touch "{flag}"
  echo "ERROR: failed to send DRAIN_JOBS command to startd (connection refused)" >&2
  exit 1
fi
echo "Sent request to drain the startd"
"""


@pytest.fixture
def condor_drain_failing_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A condor_drain that fails its first call (the startd was busy restarting), then works."""
    return fake_condor_drain(tmp_path, monkeypatch, FAILS_ONCE)


def test_a_failed_drain_is_retried_until_it_takes(imds: tuple[str, ImdsState], condor_drain_failing_once: Path) -> None:
    endpoint, state = imds
    state.spot_action = {"action": "terminate", "time": "2026-11-23T04:00:00Z"}
    watcher = Watcher(Imds(endpoint), CondorDrainer(machine="gpu-4.example"))
    first = watcher.poll()
    assert len(first) == 1 and "exit 1" in first[0] and "connection refused" in first[0]
    second = watcher.poll()
    assert len(second) == 1 and "condor_drain -quick" in second[0] and second[0].endswith(": ok")
    assert watcher.poll() == []  # drained: the notice is handled now
    calls = condor_drain_failing_once.read_text().splitlines()
    assert len(calls) == 2 and all(call.startswith("-quick -reason dagflow agent: EC2 spot") for call in calls)


def test_cli_watch_retries_a_failed_drain(imds: tuple[str, ImdsState], condor_drain_failing_once: Path) -> None:
    endpoint, state = imds
    state.spot_action = {"action": "terminate", "time": "2026-11-23T05:00:00Z"}
    result = CliRunner().invoke(
        app,
        ["agent", "watch", "--imds-endpoint", endpoint, "--machine", "gpu-5", "--iterations", "4", "--interval", "0.1"],
    )
    assert result.exit_code == 0, result.output
    calls = condor_drain_failing_once.read_text().splitlines()
    assert len(calls) == 2, calls  # failed once, drained on the next poll, then left alone
    assert all(call.startswith("-quick -reason dagflow agent: EC2 spot interruption notice") for call in calls)
