"""Usage history is untrusted: records come from execute hosts. A record that is not a sane measurement
(NaN, an infinity, a wall time past a year, CPU time no machine could spend in its wall time) is skipped
and reported, never a crash of `resources suggest`, `plan` or `run`; and no single record decides a
request alone: a field is learned from at least MIN_RECORDS records, and the highest counts for at most
OUTLIER_FACTOR times the next-highest."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_local_support import cli_env
from test_resources_suggest import _history, _pipeline, _record

from dagflow.run.resources.history import pipeline_history
from dagflow.run.resources.suggest import MIN_RECORDS, OUTLIER_FACTOR, round_duration_s, round_memory_mb, suggest
from dagflow.run.usage import USAGE_FILE


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # the timeout only keeps a regression from hanging the suite; nothing here measures time
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env={**cli_env(), "COLUMNS": "250"},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _line(**fields: object) -> str:
    record = {"node": "train.x", "step": "train", "attempt": 1, "engine": "slurm", "wall_s": 100.0, "cpu_s": 150.0,
              "peak_memory_mb": 1000.0, "requested": {"cpus": 1, "memory_mb": 1024}, "reason": None}
    record.update(fields)
    return json.dumps(record)  # json writes NaN and Infinity as such, as a hostile host can


INSANE = [
    (_line(wall_s=float("nan")), "wall_s is nan, not a finite number"),
    (_line(cpu_s=float("inf")), "cpu_s is inf, not a finite number"),
    (_line(wall_s=1e308), "wall_s is 1e+308, out of range (0 to 31622400)"),
    (_line(wall_s=1e-300, cpu_s=1e300), "cpu_s is 1e+300, out of range"),
    (_line(wall_s=0.001, cpu_s=100.0), "cpu_s 100 in wall_s 0.001 is 100000 cores busy (at most 4096)"),
    (_line(peak_memory_mb=-5.0), "peak_memory_mb is -5, out of range"),
    (_line(reason="timeout", wall_s=1e308), "wall_s is 1e+308, out of range"),
    (_line(reason="oom", requested={"memory_mb": 1e300}), "requested['memory_mb'] is 1e+300, out of range"),
]


def _hostile_history(tmp_path: Path) -> Path:
    """Three runs of sane records (as in test_resources_suggest) and, in the newest, one insane record each."""
    runs_dir = _history(tmp_path)
    with open(runs_dir / "learn-20261124-050002-beef" / USAGE_FILE, "a") as handle:
        for line, _ in INSANE:
            handle.write(line + "\n")
    return runs_dir


def test_insane_records_are_skipped_and_reported_by_suggest_plan_and_run(tmp_path: Path) -> None:
    _hostile_history(tmp_path)
    pipeline = _pipeline(tmp_path)
    usage_file = Path(".dagflow/runs/learn-20261124-050002-beef") / USAGE_FILE
    done = cli("resources", "suggest", str(pipeline), "--json", cwd=tmp_path)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stderr[-3000:]
    train = json.loads(done.stdout)["steps"]["train"]
    assert (train["memory"]["suggested"], train["cpus"]["suggested"], train["timeout"]["suggested"]) == (2560, 2, 300)
    for number, (_, reason) in enumerate(INSANE, start=12):  # 11 sane records come first
        assert f"warning: {tmp_path / usage_file}:{number}: {reason}" in done.stderr, done.stderr
    assert done.stderr.count("record skipped") == len(INSANE)
    assert len(json.loads(done.stdout)["skipped"]) == len(INSANE)

    planned = cli("plan", str(pipeline), "--json", cwd=tmp_path)
    assert planned.returncode == 0 and "Traceback" not in planned.stderr, planned.stderr[-3000:]
    step = json.loads(planned.stdout)["steps"]["train"]
    assert (step["resources"]["memory_mb"], step["resources"]["cpus"], step["timeout_s"]) == (2560, 2, 300)
    assert f"{usage_file}:12: wall_s is nan, not a finite number; record skipped" in planned.stderr

    ran = cli("run", str(pipeline), cwd=tmp_path)
    assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stdout + ran.stderr[-3000:]


def test_one_record_alone_decides_nothing(tmp_path: Path) -> None:
    runs_dir = tmp_path / ".dagflow" / "runs"
    _record(runs_dir / "learn-20261124-050000-beef", "train", peak=1000.0, wall=100.0, cpu=150.0)
    learned = suggest(pipeline_history("learn", [runs_dir]))["train"]
    for field in ("memory", "cpus", "timeout"):
        assert learned[field].value is None, learned[field]
        assert f"1 record(s), at least {MIN_RECORDS} needed" in learned[field].why
    planned = cli("plan", str(_pipeline(tmp_path)), "--json", cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    step = json.loads(planned.stdout)["steps"]["train"]
    assert (step["resources"]["memory_mb"], step["resources"]["cpus"], step["timeout_s"]) == (1024, 1, None)
    assert "auto: 1 record(s), at least 2 needed for step train" in step["resource_notes"]["memory"]


def test_the_highest_record_counts_for_at_most_outlier_factor_times_the_next(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs" / "learn-20261124-050000-beef"
    _record(run_dir, "train", node="a", peak=1000.0, wall=100.0, cpu=190.0)
    _record(run_dir, "train", node="b", peak=1100.0, wall=110.0, cpu=209.0)
    # sane on its own (60 GB, 4 months, 3,000 cores busy), but nothing else comes near it
    _record(run_dir, "train", node="c", peak=60_000.0, wall=1e7, cpu=3e10)
    learned = suggest(pipeline_history("learn", [tmp_path / "runs"]))["train"]
    assert learned["memory"].value == round_memory_mb(1100 * OUTLIER_FACTOR * 1.2)
    assert learned["timeout"].value == round_duration_s(110 * OUTLIER_FACTOR * 1.5)
    assert learned["cpus"].value == 19  # 1.9 cores busy x 10, less the 0.15 of noise
    assert "highest record counted as 11000 MB" in learned["memory"].why
    assert learned["memory"].evidence.max == 60_000.0  # the evidence still shows what was recorded
