"""Files a job wrote are read only when they are regular files, and at most MAX_JOB_FILE_BYTES of them (#40
items 11, 12). A FIFO where a metrics file or an input directory's entry should be used to block `dagflow run`
(cache hashing), the search scheduler (which then ignored SIGTERM), `promote --metrics` and `report` for ever;
a 1 GB metrics file was read whole (MemoryError in the scheduler, on every restart)."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from test_local_support import dagflow_cli, make_plan, node, step
from test_untrusted_json_files import cli

from dagflow.bounded import MAX_JOB_FILE_BYTES, BoundedInputError, read_bounded
from dagflow.engines.jobs.cache import NodeCache
from dagflow.promote.decide import PromotionInputError, read_metrics
from dagflow.report.collect import read_metrics as report_metrics
from dagflow.search.progress import ProgressReader
from dagflow.search.trials import TrialError, read_metric

NOT_REGULAR = "a FIFO, not a regular file"
TOO_LARGE = "larger than 16 MiB"


def returns(call: Callable[[], object], fifo: Path) -> object:
    """call()'s result; fails when it blocks on the FIFO (after opening the FIFO's other end to free it)."""
    done: list[object] = []
    thread = threading.Thread(target=lambda: done.append(call()), daemon=True)
    thread.start()
    thread.join(60)  # a safety net only: a read that does not block returns at once
    if thread.is_alive():
        for _ in range(2):  # a writer frees the open, closing it ends the read
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(5)
        pytest.fail("blocked on the FIFO")
    return done[0] if done else None


def raised(call: Callable[[], object], kind: type[Exception]) -> Callable[[], object]:
    def wrapped() -> object:
        try:
            call()
        except kind as error:
            return str(error)
        return "no error"

    return wrapped


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "metrics.json"
    os.mkfifo(path)
    return path


@pytest.fixture
def huge(tmp_path: Path) -> Path:
    path = tmp_path / "big.json"
    path.write_text('{"loss": 0.5}' + " " * MAX_JOB_FILE_BYTES)  # valid JSON, one byte over the cap
    return path


def test_a_fifo_metrics_file_is_refused_by_every_reader_without_blocking(fifo: Path) -> None:
    error = returns(raised(lambda: read_metric(fifo, "loss"), TrialError), fifo)
    assert error == f"metrics file {fifo} is {NOT_REGULAR}: dagflow reads only regular files here"
    assert NOT_REGULAR in str(returns(raised(lambda: read_metrics(str(fifo)), PromotionInputError), fifo))
    assert returns(lambda: ProgressReader("loss").curve(fifo), fifo) == {}
    plan = make_plan(fifo.parent, [step("s")], [node("s", "s", "true", metrics=str(fifo))])
    assert returns(lambda: report_metrics(plan), fifo) == ({}, 0)


def test_a_metrics_file_over_the_cap_is_refused_naming_the_cap(huge: Path) -> None:
    with pytest.raises(TrialError, match=f"metrics file {huge} is {TOO_LARGE}, the most dagflow reads"):
        read_metric(huge, "loss")
    with pytest.raises(PromotionInputError, match=TOO_LARGE):
        read_metrics(str(huge))
    plan = make_plan(huge.parent, [step("s")], [node("s", "s", "true", metrics=str(huge))])
    assert report_metrics(plan) == ({}, 0)
    huge.write_text('{"loss": 0.5}' + " " * (MAX_JOB_FILE_BYTES - 13))  # exactly the cap: read
    assert read_metric(huge, "loss") == 0.5


def test_read_bounded_refuses_a_directory_and_a_device(tmp_path: Path) -> None:
    with pytest.raises(BoundedInputError, match="a directory, not a regular file"):
        read_bounded(tmp_path)
    with pytest.raises(BoundedInputError, match="a character device, not a regular file"):
        read_bounded("/dev/zero")  # endless: read whole it would never end


def test_a_fifo_in_an_input_directory_is_hashed_by_name_without_blocking(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.csv").write_text("1\n")
    os.mkfifo(data / "pipe")
    plan = make_plan(tmp_path, [step("s")], [node("s", "s", "true", inputs=["data"])])
    cache = NodeCache(tmp_path / "cache", tmp_path)
    first = returns(lambda: cache.key(plan, plan.nodes["s"], []), data / "pipe")
    (data / "a.csv").write_text("2\n")
    assert cache.key(plan, plan.nodes["s"], []) != first  # the regular file's content still counts


PIPELINE = """name: p
steps:
  use:
    command: [sh, -c, "cat data/a.csv > out.txt"]
    inputs: [data]
    outputs: [out.txt]
"""


def test_run_and_report_finish_with_a_fifo_in_an_input_directory_and_as_a_metrics_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data/a.csv").write_text("1\n")
    os.mkfifo(tmp_path / "data/pipe")
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    for attempt in ("runs", "is cached"):  # dagflow_cli's timeout is the safety net for a hang
        ran = dagflow_cli("run", "pipeline.yaml", cwd=tmp_path)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, (attempt, ran.stdout + ran.stderr)
    os.mkfifo(tmp_path / "metrics.json")
    promote = ["--metric", "loss", "--better", "lower", "--than", "latest", "--model", "data/", "--node", "n"]
    promoted = dagflow_cli("promote", "--metrics", "metrics.json", *promote, "--run-id", "r1", cwd=tmp_path)
    assert promoted.returncode == 2 and "Traceback" not in promoted.stderr, promoted.stderr
    assert f"metrics file metrics.json is not readable JSON: {NOT_REGULAR}" in promoted.stderr


OBJECTIVE = """import json, os, sys
from pathlib import Path
out = Path(sys.argv[2])
out.parent.mkdir(parents=True, exist_ok=True)
if not os.path.exists("fifo-done"):
    open("fifo-done", "w").close()
    os.mkfifo(out)
elif not os.path.exists("huge-done"):
    open("huge-done", "w").close()
    out.write_text('{"loss": 0.5}' + " " * (17 * 1024 * 1024))
else:
    out.write_text(json.dumps({"loss": (float(sys.argv[1]) - 0.3) ** 2}))
"""

SEARCH = """name: pipes
params: {x: 0.0}
steps:
  evaluate:
    kind: evaluate
    command: python objective.py {params.x} out/{run.id}/metrics.jsonl
    metrics: out/{run.id}/metrics.jsonl
search:
  objective: {metric: loss, goal: minimize}
  variables:
    x: {type: FLOAT, min: -1, max: 1}
  budget: 3
  parallel: 1
  optimizer: random
  early_stopping: {rule: median, min_steps: 1, min_trials: 1}
"""


@pytest.mark.slow
def test_a_search_fails_the_trials_whose_metrics_file_is_a_fifo_or_too_large_and_goes_on(tmp_path: Path) -> None:
    (tmp_path / "objective.py").write_text(OBJECTIVE)
    (tmp_path / "pipeline.yaml").write_text(SEARCH)
    ran = cli("search", "run", "pipeline.yaml", cwd=tmp_path)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stdout + ran.stderr[-3000:]
    with sqlite3.connect(tmp_path / ".dagflow" / "search.db") as connection:
        rows = connection.execute("SELECT state, error FROM trials ORDER BY number").fetchall()
    assert [state for state, _ in rows] == ["failed", "failed", "succeeded"], rows
    assert NOT_REGULAR in rows[0][1] and TOO_LARGE in rows[1][1], rows
    readers = (("search", "run", "pipeline.yaml"), ("search", "status", "pipes", "--no-plot"), ("report", "pipes-t1"))
    for args in readers:
        done = cli(*args, cwd=tmp_path)  # a restart and the readers meet the same files
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr[-3000:])
    assert json.loads(cli("search", "status", "pipes", "--json", cwd=tmp_path).stdout)
