"""A cancelled batch job's node ends interrupted, not failed, whichever signal lands first (engines/batch/node.py).

`scancel` signals every process of the job; when the node's own signal ends it before the wrapper's arrives,
the wrapper sees an ordinary exit. For a shell node that is exit 128+signal (143 for SIGTERM), which the wrapper
used to journal as a failure: the Slurm cancel test in test_engine_contract.py saw `long: failed exit=143`.
`dagflow cancel` writes its marker before it signals the jobs, so the wrapper reads it and stops instead.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from dagflow.engines.batch.node import OWN_STOP_WAIT_S, stop_signal_of
from dagflow.engines.batch.node import main as node_main
from dagflow.engines.batch.records import BatchRecords

# A shell whose command is killed by SIGTERM, exiting 128+15 as sh does: the node's side of a cancel.
SHELL_KILLED = ["sh", "-c", 'sh -c "kill -TERM \\$\\$"; exit $?']


def _wrap(tmp_path: Path, *extra: str) -> tuple[int, list[dict]]:
    (tmp_path / "logs").mkdir(exist_ok=True)
    journal = tmp_path / "journal.jsonl"
    rc = node_main([
        "--journal", str(journal), "--logs", str(tmp_path / "logs"), "--node", "long",
        "--workdir", str(tmp_path), "--retries", "2", *extra, "--", *SHELL_KILLED,
    ])  # fmt: skip
    return rc, [json.loads(line) for line in journal.read_text().splitlines()]


def _marker(tmp_path: Path, cancelled_sub: int, own_sub: int) -> list[str]:
    records = BatchRecords(tmp_path, "slurm")
    records.dir.mkdir()
    records.mark_cancelled(cancelled_sub)
    return ["--cancel-marker", str(records.cancel_marker(own_sub).path), "--submission", str(own_sub)]


_ENDINGS = [(-15, 15), (143, 15), (130, 2), (129, 1), (0, 0), (1, 0), (128, 0), (200, 0)]


@pytest.mark.parametrize(("rc", "signum"), _ENDINGS)
def test_the_signal_that_ended_a_node_is_read_from_a_kill_or_a_shell_exit(rc: int, signum: int) -> None:
    assert stop_signal_of(rc) == signum


def test_a_shell_node_ended_by_the_cancel_leaves_no_end_event_and_no_retry(tmp_path: Path) -> None:
    rc, events = _wrap(tmp_path, *_marker(tmp_path, cancelled_sub=3, own_sub=3))
    assert rc == 128 + signal.SIGTERM
    assert [event["e"] for event in events] == ["start"]  # the status reader journals it interrupted
    usage = [json.loads(line) for line in (tmp_path / "usage.jsonl").read_text().splitlines()]
    assert [(record["exit_code"], record["reason"]) for record in usage] == [(143, "killed")]


@pytest.mark.slow
def test_without_a_cancel_of_its_submission_the_same_exit_is_a_failure_retried(tmp_path: Path) -> None:
    # An earlier submission was cancelled, not this one: a node killed by someone else fails and is retried
    # (after the wrapper waited OWN_STOP_WAIT_S for a signal of its own, per attempt).
    assert OWN_STOP_WAIT_S <= 5
    rc, events = _wrap(tmp_path, *_marker(tmp_path, cancelled_sub=2, own_sub=3))
    assert rc == 143
    ends = [(event["s"], event["rc"]) for event in events if event["e"] == "end"]
    assert ends == [("retry", 143), ("retry", 143), ("failed", 143)]
