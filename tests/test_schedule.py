"""`dagflow schedule`: cron expressions, and the user's real crontab through the real `crontab` command,
with the installed line run the way cron runs it (`env -i /bin/sh -c`, no environment at all)."""

from __future__ import annotations

import fcntl
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from test_local_rerun_after_crash import LONG

from dagflow.errors import SpecError
from dagflow.spec import parse_spec
from dagflow.spec.cron import CronError, next_fire_times, normalize

PIPELINE = """\
name: nightly
matrix:
  region: [us, br]
steps:
  train:
    command: [python, -c, "open('trained-{region}.txt', 'w').write('100%')"]
  report:
    needs: [train]
    over: [region]
    command: [python, -c, "open('report.txt', 'w').write('done')"]
schedule: {cron: "30 4 * * MON-FRI"PER}
"""


def test_cron_expressions_are_normalised_and_checked() -> None:
    assert normalize("@daily") == "0 0 * * *"
    assert normalize(" 0  3 * JAN,jul sun ") == "0 3 * 1,7 0"
    assert next_fire_times("0 3 * * *", datetime(2025, 1, 1, 12, 0)) == [
        datetime(2025, 1, 2, 3, 0), datetime(2025, 1, 3, 3, 0), datetime(2025, 1, 4, 3, 0)
    ]
    for bad, message in [
        ("0 3 * *", "five fields, this one has 4"),
        ("61 * * * *", "minute field '61': 61 is out of range (0-59)"),
        ("0 0 L * *", "only numbers"),
        ("0 0 30 2 *", "never fires"),
        ("@reboot", "not a schedule"),
        ("0 0 * * funday", "not a day of week name"),
    ]:
        with pytest.raises(CronError) as caught:
            normalize(bad)
        assert message in str(caught.value)


def test_invalid_cron_is_a_located_validation_error() -> None:
    text = textwrap.dedent("""\
        name: p
        steps:
          a: {command: echo hi}
        schedule:
          cron: "0 25 * * *"
        """)
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "p.yaml")
    (rendered,) = [d.render() for d in caught.value.diagnostics]
    assert rendered.startswith("p.yaml:5:9: schedule.cron: hour field '25': 25 is out of range (0-23) (allowed: five")


@pytest.fixture
def user_crontab() -> Iterator[str]:
    """The real crontab of this user, saved and put back afterwards; a line of someone else's in it. Held
    under a lock: the crontab is the machine's, and test files run in parallel (pytest-xdist)."""
    if shutil.which("crontab") is None:
        pytest.skip("the crontab command is not installed (CI installs Debian's cron package in .ci/run)")
    with open(Path(tempfile.gettempdir()) / "dagflow-tests-crontab.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False)
        foreign = "17 1 * * * /usr/bin/true # not dagflow's"
        subprocess.run(["crontab", "-"], input=f"MAILTO=''\n{foreign}\n", text=True, check=True)
        try:
            yield foreign
        finally:
            if saved.returncode == 0:
                subprocess.run(["crontab", "-"], input=saved.stdout, text=True, check=True)
            else:
                subprocess.run(["crontab", "-r"], capture_output=True, check=False)


def crontab_text() -> str:
    return subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=True).stdout


def dagflow(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], capture_output=True, text=True, cwd=cwd,
                          check=False, timeout=120)


def run_as_cron(line: str) -> subprocess.CompletedProcess[str]:
    """Run a crontab line's command the way cron does: /bin/sh -c with an empty environment, `\\%` as `%`."""
    command = line.split(" ", 5)[5].replace("\\%", "%")
    return subprocess.run(["env", "-i", "/bin/sh", "-c", command], capture_output=True, text=True, cwd="/",
                          check=False, timeout=120)


@pytest.mark.slow
def test_install_replace_list_remove_and_run_as_cron(user_crontab: str, tmp_path: Path) -> None:
    project = tmp_path / "my project"  # a space: every path in the line must be quoted
    project.mkdir()
    pipeline = project / "pipeline.yaml"
    pipeline.write_text(PIPELINE.replace("PER", ""))

    first = dagflow("schedule", "install", str(pipeline))
    assert first.returncode == 0, first.stderr
    assert "installed 1 crontab line" in first.stdout and "30 4 * * 1-5" in first.stdout
    table = crontab_text()
    assert user_crontab in table and "MAILTO=''" in table
    block = table[table.index("# BEGIN dagflow"):].splitlines()
    assert block[0] == f"# BEGIN dagflow {pipeline}" and block[-1] == f"# END dagflow {pipeline}"
    (line,) = block[1:-1]
    assert line.startswith("30 4 * * 1-5 cd ")
    assert "flock -n" in line and f"{Path(sys.executable).absolute()} -m dagflow run" in line
    assert ".dagflow/schedule/nightly.log" in line, "the log is named after the pipeline"

    pipeline.write_text(PIPELINE.replace("PER", ", per: region"))
    again = dagflow("schedule", "install", str(pipeline))
    assert again.returncode == 0 and "replaced 2 crontab lines" in again.stdout
    table = crontab_text()
    assert table.count("# BEGIN dagflow") == 1 and user_crontab in table
    lines = [entry for entry in table.splitlines() if "-m dagflow schedule run" in entry]
    assert len(lines) == 2 and "--only region=us" in lines[0] and "--only region=br" in lines[1]

    listing = dagflow("schedule", "list", str(pipeline))
    assert listing.returncode == 0
    assert len(re.findall(r"  (3[0-9]|[45][0-9]) 4 \* \* 1-5 \(region=", listing.stdout)) == 2  # spread
    assert listing.stdout.splitlines()[1].count(", ") == 2, "three fire times"

    # As cron runs it: nothing from this shell's environment, not even PATH or HOME.
    result = run_as_cron(lines[0])
    assert result.returncode == 0, result.stderr
    log = (project / ".dagflow/schedule/nightly-us.log").read_text()
    assert "succeeded" in log, log
    assert (project / "trained-us.txt").read_text() == "100%", "cron's % survived the escaping"
    assert not (project / "trained-br.txt").exists() and not (project / "report.txt").exists()

    # A firing while the previous one still runs does nothing.
    lock = project / ".dagflow/schedule/my project-br.lock"
    with subprocess.Popen(["flock", str(lock), "sleep", "30"]) as holder:
        try:
            for _ in range(50):
                if subprocess.run(["flock", "-n", str(lock), "true"], check=False).returncode:
                    break
                subprocess.run(["sleep", "0.1"], check=False)
            blocked = run_as_cron(lines[1])
        finally:
            holder.kill()
    assert blocked.returncode != 0 and not (project / "trained-br.txt").exists()

    removed = dagflow("schedule", "remove", str(pipeline))
    assert removed.returncode == 0 and "removed" in removed.stdout
    table = crontab_text()
    assert "dagflow" not in table.replace("not dagflow's", "") and user_crontab in table
    assert "no schedule installed" in dagflow("schedule", "remove", str(pipeline)).stdout
    assert "no dagflow schedule installed" in dagflow("schedule", "list").stdout


@pytest.mark.slow
def test_condor_cron_job_and_refusals(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(PIPELINE.replace('"30 4 * * MON-FRI"PER', '"*/15 2-4 1,15 * *"'))
    made = dagflow("schedule", "install", "--condor", "--no-submit", str(pipeline))
    assert made.returncode == 0, made.stderr
    submit = (tmp_path / ".dagflow/schedule" / f"{tmp_path.name}.condor.sub").read_text()
    python = Path(sys.executable).absolute()
    for expected in ("universe          = local", "cron_minute       = */15", "cron_hour         = 2-4",
                     "cron_day_of_month = 1,15", "cron_day_of_week  = *", "on_exit_remove    = false",
                     f"'submit' '--engine' 'condor' '{pipeline}'", f"executable        = {python}"):
        assert expected in submit, expected
    pipeline.write_text(PIPELINE.replace("PER", ", per: region"))
    per = dagflow("schedule", "install", "--condor", str(pipeline))
    assert per.returncode == 2 and "schedule.per is not supported with --condor" in per.stderr
    secret = dagflow("schedule", "install", "--condor", "--env", "AWS_SECRET_ACCESS_KEY", str(pipeline))
    assert secret.returncode == 2 and "credentials are never written" in secret.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nsteps:\n  a: {command: echo}\nschedule: {cron: '0 3 * * 8'}\n")
    invalid = dagflow("schedule", "install", str(bad))
    assert invalid.returncode == 2 and "bad.yaml:4:18: schedule.cron: day of week field '8'" in invalid.stderr
    assert "Traceback" not in invalid.stderr + per.stderr


def test_condor_cron_job_carries_what_dagflow_submit_needs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The schedd starts a local-universe job with CONDOR_CONFIG=/dev/null and its own PATH: the firing's
    `dagflow submit` found no schedd (exit 3) until the submit file set both."""
    from dagflow.schedule.condor import submit_description
    from dagflow.schedule.entries import Entry, environment

    tools = tmp_path / "condor" / "bin"
    tools.mkdir(parents=True)
    (tools / "condor_dagman").write_text("#!/bin/sh\n")
    (tools / "condor_dagman").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    monkeypatch.setenv("CONDOR_CONFIG", str(tmp_path / "condor_config"))
    pipeline = tmp_path / "nightly.yaml"
    text = submit_description(Entry("0 3 * * *", None, pipeline, Path(sys.executable), "nightly"), environment([]))
    (line,) = [line for line in text.splitlines() if line.startswith("environment")]
    assert f"CONDOR_CONFIG='{tmp_path / 'condor_config'}'" in line
    assert f":{tools}'" in line.split("PATH=")[1].split(" ")[0]
    assert f'My.DagflowSchedulePipeline = "{pipeline}"' in text


CRASHY = """\
name: crashy
steps:
  long:
    command: [sh, long.sh]
  after:
    needs: [long]
    command: [sh, -c, 'flock effects.lock sh -c "echo after >> effects"']
schedule: {cron: "0 3 * * *"}
"""


@pytest.mark.slow
def test_the_crontab_line_fired_again_after_kill_9_of_its_runner_runs_each_node_once(
    user_crontab: str, tmp_path: Path
) -> None:
    """The line's flock is released when the runner dies while its keeper runs on: the next firing must
    continue that run (adopting the live node), not start every node a second time."""
    project = tmp_path / "nightly"
    project.mkdir()
    (project / "pipeline.yaml").write_text(CRASHY)
    (project / "long.sh").write_text(LONG)
    assert dagflow("schedule", "install", str(project / "pipeline.yaml")).returncode == 0
    (line,) = [entry for entry in crontab_text().splitlines() if "-m dagflow run" in entry]

    def fire() -> subprocess.Popen[str]:
        command = line.split(" ", 5)[5].replace("\\%", "%")
        return subprocess.Popen(["env", "-i", "/bin/sh", "-c", command], cwd="/", text=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def wait_for(condition: Callable[[], bool]) -> None:
        for _ in range(1200):
            if condition():
                return
            subprocess.run(["sleep", "0.1"], check=False)
        raise AssertionError("timed out waiting")

    starts = project / "starts"
    runs = project / ".dagflow" / "runs"
    try:
        fire_twice_killing_the_first_runner(fire, wait_for, project)
    finally:
        (project / "release").touch()  # a failed test leaves no node waiting for ever
    assert len(starts.read_text().split()) == 1, "long started twice"
    assert sorted((project / "effects").read_text().split()) == ["after", "long"]
    assert len([entry for entry in runs.iterdir() if entry.is_dir()]) == 1


def fire_twice_killing_the_first_runner(
    fire: Callable[[], subprocess.Popen[str]], wait_for: Callable[[Callable[[], bool]], None], project: Path
) -> None:
    from dagflow.run.lock import holder

    starts = project / "starts"
    runs = project / ".dagflow" / "runs"
    first = fire()
    wait_for(lambda: starts.exists() and starts.read_text().strip() != "")
    (run_dir,) = [entry for entry in runs.iterdir() if entry.is_dir()]
    runner = holder(run_dir / "runner.lock")
    assert runner is not None
    subprocess.run(["kill", "-9", str(runner[0])], check=True)
    first.wait(timeout=60)

    second = fire()
    wait_for(lambda: (run_dir / "journal.jsonl").read_text().count('"e":"run"') == 2)
    (project / "release").touch()
    assert second.wait(timeout=120) == 0, (project / ".dagflow/schedule/crashy.log").read_text()
