"""What keeps `dagflow status` of a big run cheap (benchmarks/status.py times it at 100k nodes): the text
view decodes only the usage records of the nodes it lists, and a condor status whose event log has no new
segment parses no usage record at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagflow.bounded import BoundedInputError, check_json_depth
from dagflow.engines.condor import usage_records
from dagflow.engines.condor.event_log import segment_keys
from dagflow.engines.condor.usage_records import record_condor_usage
from dagflow.plan import Node, Plan, Resources, StepInfo
from dagflow.run import usage as usage_module
from dagflow.run.journal import JournalState
from dagflow.run.layout import RunLayout
from dagflow.run.status import RunStatus
from dagflow.run.usage import NodeUsage, read_usage, record_usage

TERMINATED = """\
000 (101.000.000) 2025-03-01 14:00:00 Job submitted from host: <10.0.0.5:9618?addrs=10.0.0.5-9618>
    DAG Node: train.us
...
001 (101.000.000) 2025-03-01 14:00:05 Job executing on host: <10.0.0.6:9618?addrs=10.0.0.6-9618&alias=vm>
    SlotName: slot1_1@vm
...
005 (101.000.000) 2025-03-01 14:00:15 Job terminated.
	(1) Normal termination (return value 0)
		Usr 0 00:00:08, Sys 0 00:00:00  -  Run Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Run Local Usage
		Usr 0 00:00:08, Sys 0 00:00:00  -  Total Remote Usage
		Usr 0 00:00:00, Sys 0 00:00:00  -  Total Local Usage
	0  -  Run Bytes Sent By Job
	0  -  Run Bytes Received By Job
	0  -  Total Bytes Sent By Job
	0  -  Total Bytes Received By Job
...
"""


def _usage(node: str, attempt: int = 1, key: str | None = None) -> NodeUsage:
    return NodeUsage(
        node=node, step=node.split(".")[0], attempt=attempt, engine="condor", started=1.0, ended=2.0, wall_s=1.0,
        cpu_s=0.5, peak_memory_mb=10.0, gpu_memory_peak_mb=None, gpu_utilization_pct=None, host="vm", slot=None,
        requested={"cpus": 1}, allocated={}, exit_code=0, reason=None, extra={}, key=key,
    )  # fmt: skip


def _plan() -> Plan:
    step = StepInfo("train", "command", (), Resources(), {}, 0, (), None, 0, None)
    nodes = {name: Node(name, "train", ["true"], {}, {}) for name in ("train.us", "train.br", 'train."q"')}
    return Plan(pipeline="p", run_id="r", source="p.yaml", steps={"train": step}, nodes=nodes)


def test_read_usage_of_some_nodes_is_the_full_read_restricted_to_them(tmp_path: Path) -> None:
    records = [
        _usage("train.us", 1, "1"), _usage("train.br", 1, "2"), _usage("train.us", 2, "3"),
        _usage("train.us", 2, "3"), _usage('train."q"', 1, "4"), _usage("train.br", 2, "5"),
    ]  # fmt: skip
    for record in records:
        record_usage(tmp_path, record)
    with open(tmp_path / "usage.jsonl", "a") as handle:  # a line of another writer's layout, and a torn one
        handle.write('{"step":"train","node":"train.br","attempt":3,"engine":"condor","key":"6"}\n{"node":"train.us",')
    full = read_usage(tmp_path)
    for wanted in ({"train.us"}, {"train.br", 'train."q"'}, set()):
        assert read_usage(tmp_path, wanted) == [record for record in full if record.node in wanted]
    assert [record.key for record in read_usage(tmp_path, {"train.br"})] == ["2", "5", "6"]


def test_the_text_view_reads_only_the_usage_of_the_nodes_it_lists(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path, "r")
    layout.run_dir.mkdir()
    record_usage(layout.run_dir, _usage("train.us"))
    record_usage(layout.run_dir, _usage("train.br"))
    status = RunStatus(layout, _plan(), JournalState(), False)
    assert set(status.usage(["train.br"])) == {"train.br"}
    assert set(status.usage()) == {"train.us", "train.br"}  # every node's, and kept
    assert set(status.usage(["train.br"])) == {"train.us", "train.br"}


def test_a_condor_log_with_no_new_segment_parses_no_usage_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "dagflow.jobs.log"
    log.write_text(TERMINATED)
    assert record_condor_usage(tmp_path, _plan(), log) == 1
    recorded = read_usage(tmp_path)
    assert [(record.node, record.key) for record in recorded] == [("train.us", "101")]

    def parse(*args: object, **kwargs: object) -> object:
        raise AssertionError("usage.jsonl parsed although every segment is recorded")

    monkeypatch.setattr(usage_records, "read_usage", parse)
    monkeypatch.setattr(usage_module, "_parse", parse)
    assert record_condor_usage(tmp_path, _plan(), log) == 0
    monkeypatch.undo()
    assert read_usage(tmp_path) == recorded


def test_segment_keys_reads_a_log_that_begins_with_a_segment_end() -> None:
    log = b"005 (7.000.000) 2025-03-01 14:00:15 Job terminated.\n...\n012 (8.000.000) 2025-03-01 14:00:16 x\n...\n"
    assert segment_keys(log) == {"7", "8.held1"}


def test_json_depth_is_checked_whatever_the_bracket_count() -> None:
    check_json_depth('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')  # brackets in a string do not nest
    check_json_depth("[" * 4 + "]" * 4, max_depth=4)
    with pytest.raises(BoundedInputError, match="deeper than 4"):
        check_json_depth("[" * 5 + "]" * 5, max_depth=4)
