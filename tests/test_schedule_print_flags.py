"""Schedules you can read before installing (#43 item 12): `install --print` shows exactly the lines (or the
HTCondor submit file) that install writes, and installs nothing; run flags (--only, --set, --force) reach
each firing, checked first and quoted so the real `crontab` and HTCondor's parser give them back literally;
a `per` schedule's lines are spread over the hour; the logs are named after the pipeline."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from test_schedule import crontab_text, dagflow, run_as_cron, user_crontab  # noqa: F401 (a fixture)

from dagflow.schedule.entries import spread

PIPELINE = """\
name: nightly
matrix:
  region: [us, br, de, jp, in, mx]
  size: [small, big]
params:
  note: plain
steps:
  train:
    command:
      - python
      - -c
      - "import sys; open('trained-{region}-{size}.txt', 'a').write(sys.argv[1] + chr(10))"
      - "{params.note}"
  check:
    needs: [train]
    command: [python, -c, "open('checked-{region}-{size}.txt', 'a').write('x')"]
schedule: {cron: "CRON"PER}
"""
HOSTILE = "it's $(touch pwned) `touch pwned2` 100% ; x \"q\" \\"  # cron's %, the shell's $() ` ' " \\ and ;


def project_with(tmp_path: Path, cron: str = "30 4 * * *", per: str = "") -> Path:
    project = tmp_path / "my project"
    project.mkdir()
    pipeline = project / "pipeline.yaml"
    pipeline.write_text(PIPELINE.replace("CRON", cron).replace("PER", per))
    return pipeline


@pytest.mark.usefixtures("user_crontab")
def test_print_shows_exactly_what_install_writes_and_installs_nothing(tmp_path: Path) -> None:
    pipeline = project_with(tmp_path, per=", per: region")
    before = crontab_text()
    shown = dagflow("schedule", "install", "--print", str(pipeline))
    assert shown.returncode == 0, shown.stderr
    assert crontab_text() == before, "--print installed something"
    assert not (pipeline.parent / ".dagflow").exists(), "--print wrote something"
    assert "not installed" in shown.stderr
    printed = shown.stdout.splitlines()
    assert printed[0] == f"# BEGIN dagflow {pipeline}" and printed[-1] == f"# END dagflow {pipeline}"
    assert dagflow("schedule", "install", "--print", str(pipeline)).stdout == shown.stdout, "not deterministic"

    installed = dagflow("schedule", "install", str(pipeline))
    assert installed.returncode == 0, installed.stderr
    table = crontab_text().splitlines()
    assert table[table.index(printed[0]):] == printed

    lines = printed[1:-1]
    assert len(lines) == 6
    minutes = [int(line.split(" ", 1)[0]) for line in lines]
    assert all(30 <= minute <= 59 for minute in minutes) and len(set(minutes)) > 1, minutes
    for line, region in zip(lines, ["us", "br", "de", "jp", "in", "mx"], strict=True):
        assert line.startswith(spread("30 4 * * *", "nightly", region) + " cd ")
        assert f"--only region={region}" in line
        assert f".dagflow/schedule/nightly-{region}.log" in line, "logs are named after the pipeline"
        assert f".dagflow/schedule/my project-{region}.lock" in line


def test_only_a_single_minute_is_spread() -> None:
    assert spread("*/15 4 * * *", "nightly", "us") == "*/15 4 * * *"
    assert spread("0,30 4 * * *", "nightly", "us") == "0,30 4 * * *"
    assert spread("59 4 * * *", "nightly", "us") == "59 4 * * *"
    spread_minutes = {int(spread("0 3 * * 1", "nightly", value).split()[0]) for value in ("us", "br", "de", "jp")}
    assert len(spread_minutes) > 1 and all(0 <= minute <= 59 for minute in spread_minutes)


def test_the_condor_print_is_the_submit_file_install_writes(tmp_path: Path) -> None:
    pipeline = project_with(tmp_path)
    shown = dagflow("schedule", "install", "--condor", "--print", "--set", "note=x", str(pipeline))
    assert shown.returncode == 0, shown.stderr
    assert not (pipeline.parent / ".dagflow").exists(), "--print wrote something"
    written = dagflow("schedule", "install", "--condor", "--no-submit", "--set", "note=x", str(pipeline))
    assert written.returncode == 0, written.stderr
    (path,) = (pipeline.parent / ".dagflow" / "schedule").glob("*.condor.sub")
    assert path.read_text() == shown.stdout
    assert "nightly.condor.out" in shown.stdout


@pytest.mark.slow
@pytest.mark.usefixtures("user_crontab")
def test_run_flags_reach_each_firing_literally(tmp_path: Path) -> None:
    pipeline = project_with(tmp_path)
    project = pipeline.parent
    args = ["--only", "region=br", "--only", "size=big", "--set", f"note={HOSTILE}", "--force", "train"]
    result = dagflow("schedule", "install", *args, str(pipeline))
    assert result.returncode == 0, result.stderr
    (line,) = [entry for entry in crontab_text().splitlines() if "-m dagflow run" in entry]
    words = shlex.split(line.split(" ", 5)[5].replace("\\%", "%"))
    assert words[words.index("run") + 2:][: len(args)] == args

    for _ in range(2):  # the second firing would find both cached; --force runs `train` (and `check`) again
        fired = run_as_cron(line)
        assert fired.returncode == 0, fired.stdout + fired.stderr
    assert (project / "trained-br-big.txt").read_text() == f"{HOSTILE}\n" * 2
    assert (project / "checked-br-big.txt").read_text() == "xx"
    assert sorted(path.name for path in project.glob("trained-*")) == ["trained-br-big.txt"]
    assert not list(project.glob("pwned*")) and not list(Path("/").glob("pwned*"))
    log = (project / ".dagflow" / "schedule" / "nightly.log").read_text()
    assert len(re.findall(r"succeeded in [0-9.]+s: 2 succeeded$", log, re.MULTILINE)) == 2, log
    plans = [json.loads(path.read_text()) for path in (project / ".dagflow" / "runs").glob("*/plan.json")]
    assert [plan["overrides"]["set"] for plan in plans] == [{"note": HOSTILE}] * 2


def test_per_schedules_pass_run_flags_to_each_line(tmp_path: Path) -> None:
    pipeline = project_with(tmp_path, per=", per: region")
    shown = dagflow("schedule", "install", "--print", "--only", "size=small", "--set", "note=n", str(pipeline))
    assert shown.returncode == 0, shown.stderr
    for region, line in zip(["us", "br", "de", "jp", "in", "mx"], shown.stdout.splitlines()[1:-1], strict=True):
        words = shlex.split(line.split(" ", 5)[5])
        at = words.index("schedule")
        assert words[at:at + 9] == ["schedule", "run", str(pipeline), "--only", f"region={region}",
                                    "--only", "size=small", "--set", "note=n"]  # fmt: skip


def test_the_condor_submit_file_reads_back_the_flags_literally(tmp_path: Path) -> None:
    htcondor2 = pytest.importorskip("htcondor2")
    pipeline = project_with(tmp_path)
    value = "it's `id` 100% ; x \"q\" $x"
    done = dagflow("schedule", "install", "--condor", "--print", "--only", "region=us", "--set", f"note={value}",
                   str(pipeline))  # fmt: skip
    assert done.returncode == 0, done.stderr
    arguments = htcondor2.Submit(done.stdout).expand("arguments")
    quoted = value.replace("'", "''").replace('"', '""')  # HTCondor's own quoting, read back as the value
    assert arguments.endswith(f"'--only' 'region=us' '--set' 'note={quoted}'\"")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--force", "trian"], "--force 'trian': not a step of"),
        (["--only", "region=xx"], "'xx' is not a value of region"),
        (["--only", "region=us"], "schedule.per already gives each line its own region"),
        (["--set", "nope=1"], "'nope' is not a param"),
        (["--set", "note=a\n* * * * * touch /tmp/dagflow-injected"], "control characters (such as a newline)"),
        (["--condor", "--force", "train"], "--force is the local engine's"),
    ],
)
@pytest.mark.usefixtures("user_crontab")
def test_flags_that_do_not_fit_are_refused_before_anything_is_written(
    tmp_path: Path, args: list[str], message: str
) -> None:
    pipeline = project_with(tmp_path, per=", per: region")
    if "--condor" in args:
        pipeline.write_text(PIPELINE.replace("CRON", "30 4 * * *").replace("PER", ""))
    before = crontab_text()
    result = dagflow("schedule", "install", *args, str(pipeline))
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr
    assert crontab_text() == before
    assert not (pipeline.parent / ".dagflow" / "schedule").exists() or not any(
        (pipeline.parent / ".dagflow" / "schedule").glob("*.sub")
    )


def test_schedule_run_takes_the_flags_a_line_passes(tmp_path: Path) -> None:
    pipeline = project_with(tmp_path, per=", per: region")
    done = dagflow("schedule", "run", str(pipeline), "--only", "region=us", "--only", "size=small",
                   "--set", "note=hello", "--force", "train", cwd=pipeline.parent)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (pipeline.parent / "trained-us-small.txt").read_text() == "hello\n"
    assert re.search(r"2 succeeded", done.stdout + done.stderr), done.stdout
