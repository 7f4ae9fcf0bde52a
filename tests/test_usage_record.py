"""The usage record (dagflow/run/usage.py): round trip, torn lines, dedup by key, concurrent appends."""

from __future__ import annotations

import json
import multiprocessing
import os
from dataclasses import replace
from pathlib import Path

import pytest

from dagflow.run.usage import (
    USAGE_FILE,
    NodeUsage,
    latest_by_node,
    read_usage,
    record_usage,
    record_usages_once,
)


def _usage(node: str = "train[lr=0.1]", attempt: int = 1, **changes: object) -> NodeUsage:
    base = NodeUsage(
        node=node,
        step=node.split("[")[0],
        attempt=attempt,
        engine="local",
        started=1_764_000_000.25,
        ended=1_764_000_012.75,
        wall_s=12.5,
        cpu_s=11.9,
        peak_memory_mb=812.3,
        gpu_memory_peak_mb=None,
        gpu_utilization_pct=None,
        host="box",
        slot=None,
        requested={"cpus": 2, "memory_mb": 2048.0},
        allocated={},
        exit_code=0,
        reason=None,
        extra={"note": "x", "disk_used_mb": 3.5},
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def test_round_trip_keeps_every_field(tmp_path: Path) -> None:
    first = _usage()
    second = _usage("eval", attempt=2, reason="oom", exit_code=137, key="41", engine="condor")
    record_usage(tmp_path, first)
    record_usage(tmp_path, second)
    assert read_usage(tmp_path) == [first, second]
    lines = (tmp_path / USAGE_FILE).read_text().splitlines()
    assert [json.loads(line)["node"] for line in lines] == ["train[lr=0.1]", "eval"]


def test_missing_file_is_no_records(tmp_path: Path) -> None:
    assert read_usage(tmp_path) == []


def test_torn_line_is_skipped_and_the_next_record_stays_whole(tmp_path: Path) -> None:
    record_usage(tmp_path, _usage("a"))
    with open(tmp_path / USAGE_FILE, "ab") as handle:
        handle.write(b'{"node": "b", "step": "b", "att')  # a writer killed mid-line
    assert [r.node for r in read_usage(tmp_path)] == ["a"]
    record_usage(tmp_path, _usage("c"))
    assert [r.node for r in read_usage(tmp_path)] == ["a", "c"]


def test_malformed_and_foreign_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / USAGE_FILE
    good = _usage("ok")
    record_usage(tmp_path, good)
    with open(path, "a") as handle:
        handle.write(json.dumps({"node": "x", "step": "x", "attempt": 0, "engine": "local"}) + "\n")
        handle.write(json.dumps({"node": "y", "step": "y", "attempt": 1, "engine": "local", "wall_s": "1"}) + "\n")
        handle.write("[1, 2]\n")
        handle.write(json.dumps({"node": "z", "step": "z", "attempt": True, "engine": "local"}) + "\n")
    assert read_usage(tmp_path) == [good]


def test_older_and_newer_lines_read(tmp_path: Path) -> None:
    """Missing optional fields read as None/empty; unknown fields are ignored."""
    line = {"node": "n", "step": "s", "attempt": 3, "engine": "slurm", "wall_s": 4, "future_field": [1]}
    (tmp_path / USAGE_FILE).write_text(json.dumps(line) + "\n")
    (record,) = read_usage(tmp_path)
    assert record.attempt == 3 and record.wall_s == 4.0 and isinstance(record.wall_s, float)
    assert record.requested == {} and record.extra == {} and record.key is None and record.cpu_s is None


def test_non_finite_numbers_are_written_as_null(tmp_path: Path) -> None:
    record_usage(tmp_path, _usage(cpu_s=float("nan"), requested={"cpus": float("inf"), "gpus": 1}))
    (record,) = read_usage(tmp_path)
    assert record.cpu_s is None and record.requested == {"gpus": 1}


def test_latest_by_node_takes_the_highest_attempt() -> None:
    records = [_usage("a", 1), _usage("b", 1), _usage("a", 3), _usage("a", 2), _usage("b", 1, wall_s=9.0)]
    latest = latest_by_node(records)
    assert latest["a"].attempt == 3
    assert latest["b"].wall_s == 9.0  # the later record among equal attempts


def test_record_once_appends_one_record_per_node_and_key(tmp_path: Path) -> None:
    keyed = _usage("a", key="17", engine="condor")
    assert record_usages_once(tmp_path, [keyed]) == 1
    assert record_usages_once(tmp_path, [replace(keyed, wall_s=99.0)]) == 0
    assert record_usages_once(tmp_path, [replace(keyed, node="b")]) == 1
    assert record_usages_once(tmp_path, [replace(keyed, key="18", attempt=2)]) == 1
    assert [(r.node, r.key) for r in read_usage(tmp_path)] == [("a", "17"), ("b", "17"), ("a", "18")]
    with pytest.raises(ValueError):
        record_usages_once(tmp_path, [_usage("c")])


def test_reader_drops_duplicate_keys_written_by_other_hosts(tmp_path: Path) -> None:
    keyed = _usage("a", key="17", engine="condor")
    record_usage(tmp_path, keyed)
    record_usage(tmp_path, replace(keyed, wall_s=1.0))  # a racing writer that held no lock
    assert read_usage(tmp_path) == [keyed]


def _append_many(run_dir: str, writer: int, count: int, keyed: bool) -> None:
    for index in range(count):
        if keyed:
            record_usages_once(Path(run_dir), [_usage(f"n{index}", key="1", extra={"w": writer})])
        else:
            record_usage(Path(run_dir), _usage(f"w{writer}-{index}", extra={"pad": "p" * 2000}))


@pytest.mark.slow
def test_concurrent_writers_never_tear_or_duplicate(tmp_path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=_append_many, args=(str(tmp_path), w, 40, False)) for w in range(4)]
    procs += [context.Process(target=_append_many, args=(str(tmp_path), w, 40, True)) for w in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    records = read_usage(tmp_path)
    plain = [r for r in records if r.key is None]
    keyed = [r for r in records if r.key is not None]
    assert len(plain) == 160 and len({r.node for r in plain}) == 160
    assert sorted(r.node for r in keyed) == sorted(f"n{i}" for i in range(40))
    raw_lines = (tmp_path / USAGE_FILE).read_bytes().split(b"\n")
    assert len([line for line in raw_lines if line]) == 200  # the flock kept keyed duplicates out
    assert os.path.getsize(tmp_path / USAGE_FILE) > 0
