"""The checkpoint contract in the batch engines' node wrapper (engines/batch/node.py): directly, and on the
real Slurm and Grid Engine clusters. A checkpoint exit restarts the node in its job, is journaled
`checkpointed`, uses no retry, and is capped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dagflow.engines.batch.node import main as node_main
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.spec import load_spec
from tests.checkpoint_support import epochs, write_train

WAIT_S = 180


def wrapper(tmp_path: Path, *extra: str, epochs_: int = 4) -> tuple[int, list[dict]]:
    write_train(tmp_path)
    (tmp_path / "logs").mkdir(exist_ok=True)
    journal = tmp_path / "journal.jsonl"
    rc = node_main([
        "--journal", str(journal), "--logs", str(tmp_path / "logs"), "--node", "train",
        "--workdir", str(tmp_path), *extra, "--", "python", "train.py", str(epochs_), "0.05",
    ])  # fmt: skip
    return rc, [json.loads(line) for line in journal.read_text().splitlines()]


def test_the_wrapper_restarts_a_checkpointing_node_without_using_a_retry(tmp_path: Path) -> None:
    rc, events = wrapper(tmp_path, "--retries", "0", "--checkpoint-exit", "85", "--max-restarts", "100")
    assert rc == 0
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]
    ends = [(event["s"], event["rc"]) for event in events if event["e"] == "end"]
    assert ends == [("checkpointed", 85)] * 3 + [("succeeded", 0)]
    record = read_journal(tmp_path / "journal.jsonl").nodes["train"]
    assert (record.state, record.attempts, record.restarts) == ("succeeded", 1, 3)
    assert "restart 3 from its checkpoint" in (tmp_path / "logs" / "train.err").read_text()


def test_the_wrapper_caps_restarts_and_then_fails_with_the_exit_code(tmp_path: Path) -> None:
    rc, _ = wrapper(tmp_path, "--retries", "0", "--checkpoint-exit", "85", "--max-restarts", "2", epochs_=100)
    assert rc == 85
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3]
    record = read_journal(tmp_path / "journal.jsonl").nodes["train"]
    assert (record.state, record.rc, record.restarts) == ("failed", 85, 2)


def test_without_checkpointing_exit_85_is_an_ordinary_failure(tmp_path: Path) -> None:
    rc, events = wrapper(tmp_path, "--retries", "1")
    assert rc == 85
    assert [event["s"] for event in events if event["e"] == "end"] == ["retry", "failed"]
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2]


PIPELINE = """\
name: ckbatch
steps:
  train:
    kind: train
    command: python train.py 4 0.2
    checkpoint: {files: [ckpt/], exit_code: 85}
"""


def plan_of(tmp_path: Path) -> Plan:
    write_train(tmp_path)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    return expand(load_spec(tmp_path / "pipeline.yaml"))


def assert_checkpointed_run(tmp_path: Path, layout: RunLayout) -> None:
    assert epochs(tmp_path / "ckpt" / "epochs.log") == [1, 2, 3, 4]
    record = read_journal(layout.journal_path).nodes["train"]
    assert (record.state, record.attempts, record.restarts) == ("succeeded", 1, 3)


@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_runs_a_checkpointing_node_to_the_end_in_one_job(tmp_path: Path) -> None:
    from batch_run import submit_slurm, wait_slurm

    submitted = submit_slurm(plan_of(tmp_path), tmp_path / ".dagflow" / "runs")
    status = wait_slurm(submitted.layout, poll_s=0.2, timeout_s=WAIT_S)
    assert status.state == "succeeded", status.node_states()
    assert_checkpointed_run(tmp_path, submitted.layout)


@pytest.mark.usefixtures("sge_cluster")
def test_grid_engine_runs_a_checkpointing_node_to_the_end_in_one_job(tmp_path: Path) -> None:
    from batch_run import submit_sge, wait_sge

    submitted = submit_sge(plan_of(tmp_path), tmp_path / ".dagflow" / "runs")
    status = wait_sge(submitted.layout, poll_s=0.2, timeout_s=WAIT_S)
    assert status.state == "succeeded", status.node_states()
    assert_checkpointed_run(tmp_path, submitted.layout)
