"""What a schedule cannot write literally is refused (exit 2, the crontab untouched); everything else is
escaped so the real `crontab` and HTCondor's submit parser read back exactly the user's values."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_schedule import crontab_text, user_crontab  # noqa: F401 (a fixture)

PIPELINE = """\
name: nightly
steps:
  train:
    command: [python, -c, "print('hi')"]
schedule: {cron: "30 4 * * *"}
"""
TABLE = "MAILTO=''\n17 1 * * * /usr/bin/true # not dagflow's"  # what the user_crontab fixture leaves


def dagflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], capture_output=True, text=True, check=False,
                          timeout=120, env={**os.environ, **(env or {})})  # fmt: skip


def pipeline_in(directory: Path) -> Path:
    directory.mkdir(parents=True)
    pipeline = directory / "pipeline.yaml"
    pipeline.write_text(PIPELINE)
    return pipeline


@pytest.mark.slow
@pytest.mark.usefixtures("user_crontab")
def test_a_newline_in_the_directory_name_is_refused_and_writes_no_line(tmp_path: Path) -> None:
    pipeline = pipeline_in(tmp_path / "proj\n* * * * * touch /tmp/dagflow-injected")
    result = dagflow("schedule", "install", str(pipeline))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "control character '\\n'" in result.stderr and "Traceback" not in result.stderr
    assert crontab_text() == f"{TABLE}\n"
    condor = dagflow("schedule", "install", "--condor", "--no-submit", str(pipeline))
    assert condor.returncode == 2 and "control character '\\n'" in condor.stderr


@pytest.mark.slow
@pytest.mark.usefixtures("user_crontab")
def test_a_newline_in_an_env_value_is_refused_and_writes_no_line(tmp_path: Path) -> None:
    pipeline = pipeline_in(tmp_path / "proj")
    evil = {"EXTRA": "x\n* * * * * touch /tmp/dagflow-injected"}
    result = dagflow("schedule", "install", "--env", "EXTRA", str(pipeline), env=evil)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith("error: --env EXTRA: its value 'x\\n* * * * *")
    assert crontab_text() == f"{TABLE}\n"
    condor = dagflow("schedule", "install", "--condor", "--no-submit", "--env", "EXTRA", str(pipeline), env=evil)
    assert condor.returncode == 2 and "--env EXTRA: its value" in condor.stderr
    bad_name = dagflow("schedule", "install", "--env", "A;B", str(pipeline))
    assert bad_name.returncode == 2 and "not a variable name" in bad_name.stderr


@pytest.mark.usefixtures("user_crontab")
def test_other_characters_are_escaped_into_one_line_that_remove_takes_away(tmp_path: Path) -> None:
    value = "it's $(id) `id` 100% \"q\" ; x"
    pipeline = pipeline_in(tmp_path / "c$(Cluster)d 'q'")
    result = dagflow("schedule", "install", "--env", "EXTRA", str(pipeline), env={"EXTRA": value})
    assert result.returncode == 0, result.stderr
    lines = [line for line in crontab_text().splitlines() if line and line not in TABLE.splitlines()]
    assert len(lines) == 3  # BEGIN, the one line, END
    command = lines[1].split(" ", 5)[5].replace("\\%", "%")  # cron gives the shell `%` for `\%`
    words = shlex.split(command)
    assert f"EXTRA={value}" in words and words[1] == str(pipeline.parent)
    assert dagflow("schedule", "remove", str(pipeline)).returncode == 0
    assert crontab_text().strip() == TABLE


def test_condor_schedule_file_reads_back_literally(tmp_path: Path) -> None:
    htcondor2 = pytest.importorskip("htcondor2")
    pipeline = pipeline_in(tmp_path / "c$(Cluster)d")
    value = "v$(Cluster) $x it's"
    result = dagflow("schedule", "install", "--condor", "--no-submit", "--env", "EXTRA", str(pipeline),
                     env={"EXTRA": value})  # fmt: skip
    assert result.returncode == 0, result.stderr
    (path,) = (pipeline.parent / ".dagflow" / "schedule").glob("*.condor.sub")
    submit = htcondor2.Submit(path.read_text())
    assert submit.expand("initialdir") == str(pipeline.parent)
    assert submit.expand("output") == str(pipeline.parent / ".dagflow" / "schedule" / "nightly.condor.out")
    environment = submit.expand("environment")
    assert "EXTRA='v$(Cluster) $x it''s'" in environment
    assert f"'{pipeline}'" in submit.expand("arguments")
    refused = dagflow("schedule", "install", "--condor", "--no-submit", "--env", "EXTRA", str(pipeline),
                      env={"EXTRA": "$$(x)"})  # fmt: skip
    assert refused.returncode == 2 and "cannot be passed literally" in refused.stderr
