"""Streaming a trial's metric lines from HTCondor's transfer mode (issue #28 item 4), part by part: the
node wrapper's relay (engines/condor/node.sh --progress) run here with a fake command, the submit
description that streams stderr only for a search's objective step under early stopping, the reader of
marked lines in a streamed stderr file (search/progress.py StreamedFile) fed hostile text, the condor
engine's `progress_files` feature, and a trial that completed before its stop took effect."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_search_early_stopping import EPOCHS, bad, epochs_ran, write_training
from test_search_scheduler_support import trial_rows

from dagflow.engines.base import Capabilities
from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.lint import parse_dag
from dagflow.engines.condor.records import CondorRecord
from dagflow.engines.registry import engine_capabilities, engine_feature
from dagflow.plan.model import Node, Plan
from dagflow.run.progress_stream import STREAM_MARKER, STREAM_START, StreamedFile
from dagflow.search.early_stopping import EarlyStopper
from dagflow.search.progress import ProgressReader
from dagflow.search.scheduler import STOP_PAUSE_ENV
from dagflow.spec.model import EarlyStoppingSpec
from tests.condor_helpers import argv_of, node_submit, regional_plan, step

WRAPPER = Path(__file__).resolve().parents[1] / "dagflow" / "engines" / "condor" / "node.sh"

# Appends three metric lines (one without its newline yet for a while) and writes its own stderr noise.
COMMAND = """\
import json, sys, time
with open("m/metrics.jsonl", "a") as out:
    for step in (1, 2, 3):
        out.write(json.dumps({"step": step, "loss": 1.0 / step}) + "\\n"); out.flush()
        print(json.dumps({"step": step, "loss": 99.0}), file=sys.stderr, flush=True)  # unmarked: not progress
        time.sleep(1.2)
    out.write('{"loss": 0.3'); out.flush(); time.sleep(1.2); out.write("}\\n")
sys.exit(int(sys.argv[1]))
"""


def _group_members(pgid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def _run_wrapper(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "command.py").write_text(COMMAND)
    (tmp_path / "m").mkdir(exist_ok=True)
    process = subprocess.Popen(
        ["sh", str(WRAPPER), *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    out, err = process.communicate(timeout=60)
    time.sleep(0.2)
    assert _group_members(process.pid) == [], "the wrapper left a process behind"
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.slow
def test_the_wrapper_relays_each_metric_line_marked_onto_stderr_and_keeps_the_exit_code(tmp_path: Path) -> None:
    done = _run_wrapper(tmp_path, "--progress", "m/metrics.jsonl", "1", "m/metrics.jsonl", "python3", "command.py", "3")
    assert done.returncode == 3, done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(STREAM_START.decode())
    marked = [line.removeprefix(STREAM_MARKER.decode()) for line in lines if line.startswith(STREAM_MARKER.decode())]
    assert [json.loads(line) for line in marked] == [
        {"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}, {"step": 3, "loss": 1 / 3}, {"loss": 0.3}
    ]  # fmt: skip
    assert sum('"loss": 99.0' in line for line in lines) == 3  # the command's own stderr is passed on as it is
    # the lines arrived while the command ran: the first one before the command's later noise
    assert lines.index(STREAM_MARKER.decode() + marked[0]) < max(i for i, line in enumerate(lines) if "99.0" in line)


@pytest.mark.slow
def test_the_wrapper_without_progress_relays_nothing_and_checks_outputs(tmp_path: Path) -> None:
    done = _run_wrapper(tmp_path, "1", "m/metrics.jsonl", "python3", "command.py", "0")
    assert done.returncode == 0, done.stderr
    assert "dagflow-progress" not in done.stderr
    missing = _run_wrapper(tmp_path, "--progress", "m/metrics.jsonl", "1", "m/absent", "python3", "command.py", "0")
    assert missing.returncode == 1 and "declared output m/absent was not written" in missing.stderr


@pytest.mark.slow
def test_a_soft_kill_reaches_the_command_and_the_relay_ends(tmp_path: Path) -> None:
    (tmp_path / "command.py").write_text("import time\nopen('m/metrics.jsonl', 'a').write('{\"step\": 1}\\n')\n"
                                         "time.sleep(60)\n")  # fmt: skip
    (tmp_path / "m").mkdir()
    process = subprocess.Popen(
        ["sh", str(WRAPPER), "--progress", "m/metrics.jsonl", "0", "python3", "command.py"], cwd=tmp_path,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    time.sleep(2.5)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=30)
    time.sleep(0.2)
    assert process.returncode == 128 + signal.SIGTERM or process.returncode == -signal.SIGTERM, err
    assert '{"step": 1}' in err
    assert _group_members(process.pid) == []


# -- the submit description ------------------------------------------------------------------------------


def _search_plan(workdir: Path, progress: bool) -> Plan:
    plan = regional_plan(regions=("us",), workdir=str(workdir))
    plan.steps = {"train": step("train", "train", metrics="out/m.jsonl")}
    plan.nodes = {"train": Node("train", "train", ["python", "train.py"], {}, {}, metrics="out/m.jsonl")}
    plan.progress_steps = ["train"] if progress else []
    return plan


def test_only_a_step_read_while_it_runs_streams_its_stderr_and_relays_its_lines(tmp_path: Path) -> None:
    streamed = parse_dag(compile_plan(_search_plan(tmp_path, True), tmp_path / "a", data_mode="transfer"))
    submit = node_submit(streamed, "train")
    assert submit.expand("stream_error") == "true"
    assert argv_of(submit)[:4] == ["--progress", "out/m.jsonl", "1", "out/m.jsonl"]
    plain = parse_dag(compile_plan(_search_plan(tmp_path, False), tmp_path / "b", data_mode="transfer"))
    assert "stream_error" not in plain.submit_path("train").read_text()
    assert argv_of(node_submit(plain, "train"))[:2] == ["1", "out/m.jsonl"]
    shared = parse_dag(compile_plan(_search_plan(tmp_path, True), tmp_path / "c", data_mode="shared"))
    assert "stream_error" not in shared.submit_path("train").read_text()  # the metrics file is read in place


def test_progress_steps_round_trip_and_stay_out_of_plans_without_them(tmp_path: Path) -> None:
    plan = _search_plan(tmp_path, True)
    assert Plan.from_json(plan.to_json()).progress_steps == ["train"]
    assert "progress_steps" not in _search_plan(tmp_path, False).to_dict()


# -- reading the streamed stderr -------------------------------------------------------------------------


def test_the_reader_takes_only_marked_progress_lines_from_a_streamed_file(tmp_path: Path) -> None:
    err = tmp_path / "train.err"
    hostile = [
        b"dagflow-progress-start: 1-1",
        b'{"step": 1, "loss": 0.1}',  # unmarked: the job's own stderr
        b'dagflow-progress: {"step": 1, "loss": 0.9}',
        b"dagflow-progress: not json",
        b'dagflow-progress: {"step": true, "loss": 0.1}',
        b'dagflow-progress: {"step": -1, "loss": 0.1}',
        b'dagflow-progress: {"step": 10000000000000, "loss": 0.1}',
        b'dagflow-progress: {"step": 2, "loss": NaN}',
        b'dagflow-progress: {"step": 2, "loss": "0.1"}',
        b"dagflow-progress: " + b"[" * 5000 + b"]" * 5000,
        b'dagflow-progress: {"step": 3, "loss": 0.1, "pad": "' + b"x" * 100_000 + b'"}',
        b"dagflow-progress: \xff\xfe",
        b'  dagflow-progress: {"step": 4, "loss": 0.1}',
        b'dagflow-progress: {"step": 2, "loss": 0.8}',
    ]
    err.write_bytes(b"\n".join(hostile) + b"\n" + b'dagflow-progress: {"step": 5, "loss": 0.7}')  # no newline yet
    reader = ProgressReader("loss")
    assert reader.curve(StreamedFile(err)) == {1: 0.9, 2: 0.8}
    with err.open("ab") as handle:
        handle.write(b"\n")
    assert reader.curve(StreamedFile(err)) == {1: 0.9, 2: 0.8, 5: 0.7}
    assert ProgressReader("loss").curve(err) == {1: 0.1}  # the same file read as a metrics file: unmarked lines


def test_a_restarted_job_streams_its_curve_again_without_double_counting(tmp_path: Path) -> None:
    err = tmp_path / "train.err"
    err.write_bytes(b"dagflow-progress-start: 7-100\n" + b"".join(
        b'dagflow-progress: {"step": %d, "loss": 0.%d}\n' % (s, s) for s in (1, 2, 3)
    ))  # fmt: skip
    reader = ProgressReader("loss")
    assert reader.curve(StreamedFile(err)) == {1: 0.1, 2: 0.2, 3: 0.3}
    with err.open("ab") as handle:  # evicted and started again, the file appended to
        handle.write(b'dagflow-progress-start: 9-200\ndagflow-progress: {"step": 1, "loss": 0.5}\n')
    assert reader.curve(StreamedFile(err)) == {1: 0.5}
    # rewritten from the start, even to a greater length than was read
    err.write_bytes(
        b"dagflow-progress-start: 11-300\n" + b"noise " * 100 + b'\ndagflow-progress: {"step": 2, "loss": 0.4}\n'
    )
    assert reader.curve(StreamedFile(err)) == {2: 0.4}


def test_an_overlong_line_without_an_end_is_skipped_a_bounded_read_at_a_time(tmp_path: Path) -> None:
    err = tmp_path / "train.err"
    err.write_bytes(b"dagflow-progress-start: 1-1\n" + b"x" * (3 << 20))
    reader = ProgressReader("loss")
    for _ in range(4):
        assert reader.curve(StreamedFile(err)) == {}
    with err.open("ab") as handle:
        handle.write(b'\ndagflow-progress: {"step": 3, "loss": 0.3}\n')
    assert reader.curve(StreamedFile(err)) == {3: 0.3}


def test_the_condor_engine_names_the_nodes_stderr_in_the_transfer_mode(tmp_path: Path) -> None:
    assert engine_capabilities("condor") == Capabilities(streams_progress=True)
    progress_files = engine_feature("condor", "progress_files")
    run_dir = tmp_path / "runs" / "r1"
    plan = _search_plan(tmp_path, True)
    metrics = [tmp_path / "out/m.jsonl"]
    CondorRecord(dag=str(run_dir / "condor" / "x.dag"), data_mode="transfer").save(run_dir)
    assert progress_files(run_dir, plan, metrics) == [StreamedFile(run_dir / "logs" / "train.err")]
    CondorRecord(dag=str(run_dir / "condor" / "x.dag"), data_mode="shared").save(run_dir)
    assert progress_files(run_dir, plan, metrics) == metrics
    # the stopper reads the streamed file: the job's own JSON on stderr is not mistaken for progress
    CondorRecord(dag=str(run_dir / "condor" / "x.dag"), data_mode="transfer").save(run_dir)
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "train.err").write_text(
        "dagflow-progress-start: 1-1\n" + '{"step": 3, "loss": 0.01}\n'
        + "".join(f'dagflow-progress: {{"step": {s}, "loss": {5 + 1 / s}}}\n' for s in (1, 2, 3))
    )  # fmt: skip
    others = {"a": {1: 1.0, 2: 0.5, 3: 0.3}, "b": {1: 1.0, 2: 0.5, 3: 0.3}}
    files = {
        "r1": progress_files(run_dir, plan, metrics),
        **{name: [tmp_path / f"{name}.jsonl"] for name in others},
    }
    for name, curve in others.items():
        (tmp_path / f"{name}.jsonl").write_text(
            "".join(json.dumps({"step": s, "loss": v}) + "\n" for s, v in curve.items())
        )
    stopper = EarlyStopper(
        EarlyStoppingSpec(rule="median", min_steps=2, min_trials=2), "loss", float, files.__getitem__
    )
    decisions = stopper.decide(["r1"], ["a", "b"])
    assert decisions["r1"].step == 3 and decisions["r1"].value == pytest.approx(5 + 1 / 3)


# -- a trial that completed before the stop took effect ---------------------------------------------------


@pytest.mark.slow
def test_a_trial_that_completed_before_its_stop_took_effect_is_recorded_succeeded(tmp_path: Path) -> None:
    """The decision to stop is taken on lines read a moment after they were written (streamed ones later
    still); here the scheduler waits 4 s between deciding and cancelling, long enough for the trial to finish.
    It is recorded as it ended, succeeded with its final value, never as stopped."""
    pipeline = write_training(tmp_path / "p", budget=10, parallel=2, rule="median")
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "search", "run", str(pipeline), "--poll", "0.05", "--seed", "2"],
        cwd=tmp_path, env={**cli_env(), STOP_PAUSE_ENV: "4"}, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert len(rows) == 10, rows
    for row in rows:
        if epochs_ran(pipeline.parent, str(row["run_id"])) == EPOCHS:  # it ran to its end
            assert row["state"] == "succeeded" and row["step"] is None, (row, result.stdout)
    assert "] stopped at step " not in result.stdout
    assert any(bad(row) and row["state"] == "succeeded" for row in rows), rows
