"""The job-executor tier through an executor installed from outside dagflow (tests/plugins/htjobs: each node one
HTCondor job through the schedd, no DAGMan). The engine-contract suite holds it to every engine's outcomes
(tests/test_engine_contract.py); here: its own pipeline block and step field, validated with positions
like every other field, and on the real pool the moment a driver dies between a submission and its journal
line, and hostile command and environment values."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import engine_plugin as plugin
import pytest
from test_local_faults import small_disk  # noqa: F401  # the fixture
from test_search_scheduler_support import write_pipeline

CLI_TIMEOUT_S = 900.0
SMALL = "{memory: 64MB, disk: 10MB}"


@pytest.fixture(scope="session")
def local_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin.install_source(plugin.HTJOBS_SOURCE, tmp_path_factory.mktemp("htjobs") / "site")


def _validate(site: Path, workdir: Path, text: str, engine: str = plugin.HTJOBS) -> subprocess.CompletedProcess[str]:
    (workdir / "pipeline.yaml").write_text(text)
    env = plugin.plugin_env(site)
    return subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", "--engine", engine, "pipeline.yaml"], cwd=workdir,
        capture_output=True, text=True, check=False, env=env, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip


PIPELINE = f"""name: sections
htjobs:
  accounting_group: @GROUP@
steps:
  train:
    command: [sh, -c, "true"]
    resources: {SMALL}
    concurrency_limits: [@LIMIT@]
"""


def _pipeline(group: str, limit: str) -> str:
    return PIPELINE.replace("@GROUP@", group).replace("@LIMIT@", limit)


def test_the_executors_block_and_step_field_are_validated_with_positions(local_site: Path, tmp_path: Path) -> None:
    good = _validate(local_site, tmp_path, _pipeline("group_ml", "licence:2"))
    assert good.returncode == 0, good.stderr
    assert "ignores" not in good.stderr, good.stderr  # it honours its own field

    bad_group = _validate(local_site, tmp_path, _pipeline('"a b"', "licence"))
    assert bad_group.returncode == 2 and "Traceback" not in bad_group.stderr, bad_group.stderr
    assert "pipeline.yaml:3:" in bad_group.stderr and "htjobs.accounting_group" in bad_group.stderr, bad_group.stderr

    bad_limit = _validate(local_site, tmp_path, _pipeline("group_ml", '"licence:two"'))
    assert bad_limit.returncode == 2 and "Traceback" not in bad_limit.stderr, bad_limit.stderr
    assert "pipeline.yaml:8:" in bad_limit.stderr and "concurrency_limits" in bad_limit.stderr, bad_limit.stderr

    # another engine hears of the field where a step sets it, and only there (an empty default is not set)
    elsewhere = _validate(local_site, tmp_path, _pipeline("g", "l"), engine="local")
    assert elsewhere.returncode == 0 and "ignores concurrency_limits" in elsewhere.stderr, elsewhere.stderr
    unset = _pipeline("g", "l").replace("    concurrency_limits: [l]\n", "")
    assert "concurrency_limits" not in unset
    quiet = _validate(local_site, tmp_path, unset, engine="local")
    assert quiet.returncode == 0 and "ignores" not in quiet.stderr, quiet.stderr

    unknown = _validate(local_site, tmp_path, _pipeline("g", "l").replace("accounting_group", "acct"))
    assert unknown.returncode == 2 and "pipeline.yaml:3:" in unknown.stderr, unknown.stderr


# --- on the real pool ------------------------------------------------------------------------------------------


@pytest.fixture
def htjobs(condor_pool: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, str]]:
    site = plugin.install_source(plugin.HTJOBS_SOURCE, condor_pool.work / f"htjobs-site-{os.getpid()}-own")
    return condor_pool, {"PYTHONPATH": str(site)}


def _journal(workdir: Path) -> list[dict[str, Any]]:
    (journal,) = (workdir / ".dagflow" / "runs").glob("*/journal.jsonl")
    return [json.loads(line) for line in journal.read_text().splitlines()]


@pytest.mark.cluster
def test_a_driver_killed_between_a_submission_and_its_journal_line_is_continued_without_a_second_job(
    htjobs: tuple[Any, dict[str, str]],
) -> None:
    """The executor holds a job the journal does not name: the next plain run finds it by its key, adopts it
    and journals its start; the node runs once."""
    pool, env = htjobs
    workdir = pool.workdir("htjobs-crash")
    (workdir / "pipeline.yaml").write_text(
        f"""name: crash
steps:
  only: {{command: [sh, -c, "echo ran >> {workdir}/ran; sleep 3"], resources: {SMALL}}}
"""
    )
    pool.give(workdir)
    args = ["run", "--engine", plugin.HTJOBS, "pipeline.yaml"]
    killed = pool.dagflow(args, cwd=workdir, check=False, env={**env, "DAGFLOW_TEST_KILL_AFTER_SUBMIT": "1"})
    assert killed.returncode in (-9, 137), killed.stderr  # SIGKILL (137: as runuser passes it on)
    assert [event["e"] for event in _journal(workdir)] == ["run"]  # the job was submitted, not journaled

    again = pool.dagflow(args, cwd=workdir, check=False, env=env, timeout=CLI_TIMEOUT_S)
    assert again.returncode == 0, again.stderr
    assert "continuing that run" in again.stderr, again.stderr
    pool.wait_until(lambda: (workdir / "ran").exists(), "the node's output")
    assert (workdir / "ran").read_text() == "ran\n"
    starts = [event for event in _journal(workdir) if event["e"] == "start"]
    assert [(event["n"], event["a"]) for event in starts] == [("only", 1)]


@pytest.mark.cluster
def test_quotes_in_commands_and_environments_reach_the_job_as_written_and_add_no_submit_command(
    htjobs: tuple[Any, dict[str, str]],
) -> None:
    pool, env = htjobs
    workdir = pool.workdir("htjobs-quotes")
    (workdir / "pipeline.yaml").write_text(
        f"""name: quotes
steps:
  quoted:
    command: [sh, -c, "printf '%s|%s' \\"$0\\" \\"$TRICKY\\" > said", "it's \\"x\\" = 1"]
    env: {{TRICKY: "a'b \\"c\\" queue 5"}}
    resources: {SMALL}
"""
    )
    pool.give(workdir)
    done = pool.dagflow(["run", "--engine", plugin.HTJOBS, "pipeline.yaml", "--json"], cwd=workdir, check=False,
                        env=env, timeout=CLI_TIMEOUT_S)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (workdir / "said").read_text() == 'it\'s "x" = 1|a\'b "c" queue 5'
    run_id = json.loads(done.stdout.splitlines()[-1])["run_id"]
    jobs = pool.run(["condor_history", "-constraint", f'DagflowRunId == "{run_id}"', "-af", "DagflowNode"]).stdout
    assert jobs.split() == ["quoted"]  # one job: "queue 5" stayed inside the value


# --- the scheduler's rules, through the smallest executor (tests/plugins/procjobs: detached processes here) -----


@pytest.fixture(scope="session")
def procjobs_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin.install_source(plugin.PROCJOBS_SOURCE, tmp_path_factory.mktemp("procjobs-own") / "site")


def _procjobs(site: Path, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=workdir, capture_output=True, text=True, check=False,
        env={**plugin.plugin_env(site), **env}, timeout=CLI_TIMEOUT_S,
    )  # fmt: skip


def _status(site: Path, workdir: Path) -> dict[str, Any]:
    done = _procjobs(site, workdir, "status", "--json")
    return {node["node"]: node for node in json.loads(done.stdout)["nodes"]}


def test_a_timed_out_job_is_cancelled_and_retried_as_its_step_says(procjobs_site: Path, tmp_path: Path) -> None:
    nap = f"sleep 5{time.monotonic_ns() % 10**6:06d}"  # a command line no other test runs
    (tmp_path / "pipeline.yaml").write_text(
        f"""name: timeouts
steps:
  slow: {{command: [sh, -c, "echo ran >> ran; {nap}"], timeout: 1s, retries: 1}}
"""
    )
    done = _procjobs(procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml")
    assert done.returncode == 1, done.stderr
    slow = _status(procjobs_site, tmp_path)["slow"]
    assert (slow["state"], slow["attempts"]) == ("failed", 2), slow
    assert "timed out after 1s" in slow["why"], slow
    assert (tmp_path / "ran").read_text() == "ran\nran\n"
    left = subprocess.run(["pgrep", "-f", nap], capture_output=True, text=True, check=False).stdout
    assert left == "", f"the timed-out job still runs: {left}"


def test_a_checkpointing_node_restarts_from_its_checkpoint_until_it_finishes(
    procjobs_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "pipeline.yaml").write_text(
        """name: checkpoints
steps:
  train:
    command: [sh, -c, "echo x >> epochs; test $(wc -l < epochs) -ge 3 || exit 85"]
    checkpoint: {files: [epochs], exit_code: 85, max_restarts: 5}
"""
    )
    done = _procjobs(procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml")
    assert done.returncode == 0, done.stderr
    train = _status(procjobs_site, tmp_path)["train"]
    assert (train["state"], train["attempts"]) == ("succeeded", 1), train  # restarts are the same attempt
    assert (tmp_path / "epochs").read_text() == "x\nx\nx\n"


def test_an_unchanged_node_is_served_from_the_cache_and_an_edited_one_never(
    procjobs_site: Path, tmp_path: Path
) -> None:
    pipeline = """name: cached
steps:
  prep: {command: [sh, -c, "echo ran >> ran.prep; echo @V@ > data"], outputs: [data]}
  train: {command: [sh, -c, "echo ran >> ran.train; cat data > model"], needs: [prep], inputs: [data], outputs: [model]}
"""
    (tmp_path / "pipeline.yaml").write_text(pipeline.replace("@V@", "v1"))
    args = ("run", "--engine", plugin.PROCJOBS, "pipeline.yaml")
    assert _procjobs(procjobs_site, tmp_path, *args).returncode == 0
    again = _procjobs(procjobs_site, tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert {name: node["state"] for name, node in _status(procjobs_site, tmp_path).items()} == {
        "prep": "cached", "train": "cached",
    }  # fmt: skip
    (tmp_path / "pipeline.yaml").write_text(pipeline.replace("@V@", "v2"))
    edited = _procjobs(procjobs_site, tmp_path, *args)
    assert edited.returncode == 0, edited.stderr
    assert (tmp_path / "model").read_text() == "v2\n"
    assert (tmp_path / "ran.prep").read_text().count("ran") == 2
    assert (tmp_path / "ran.train").read_text().count("ran") == 2


def test_a_driver_killed_right_after_a_submission_leaves_a_job_the_next_run_adopts(
    procjobs_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "pipeline.yaml").write_text(
        """name: crash
steps:
  only: {command: [sh, -c, "echo ran >> ran; sleep 1"]}
  after: {command: [sh, -c, "echo ran >> ran.after"], needs: [only]}
"""
    )
    args = ("run", "--engine", plugin.PROCJOBS, "pipeline.yaml")
    killed = _procjobs(procjobs_site, tmp_path, *args, DAGFLOW_TEST_KILL_AFTER_SUBMIT="1")
    assert killed.returncode == -9, killed.stderr
    assert [event["e"] for event in _journal(tmp_path)] == ["run"]
    again = _procjobs(procjobs_site, tmp_path, *args)
    assert again.returncode == 0, again.stderr
    assert "continuing that run" in again.stderr, again.stderr
    assert (tmp_path / "ran").read_text() == "ran\n" and (tmp_path / "ran.after").read_text() == "ran\n"
    starts = [(event["n"], event["a"]) for event in _journal(tmp_path) if event["e"] == "start"]
    assert starts == [("only", 1), ("after", 1)]


def test_a_resume_runs_again_a_finished_node_whose_input_was_edited_since(procjobs_site: Path, tmp_path: Path) -> None:
    (tmp_path / "input.txt").write_text("v1\n")
    (tmp_path / "pipeline.yaml").write_text(
        """name: edited-input
steps:
  prep: {command: [sh, -c, "echo ran >> ran.prep; cat input.txt > data"], inputs: [input.txt], outputs: [data]}
  train: {command: [sh, -c, "echo ran >> ran.train; test -f fixed && cat data > model"], needs: [prep], inputs: [data]}
"""
    )
    first = _procjobs(procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml", "--json")
    assert first.returncode == 1, first.stderr
    run_id = json.loads(first.stdout.splitlines()[-1])["run_id"]
    (tmp_path / "input.txt").write_text("v2\n")
    (tmp_path / "fixed").touch()
    resumed = _procjobs(procjobs_site, tmp_path, "run", "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert "changed since they ran" in resumed.stderr, resumed.stderr
    assert (tmp_path / "model").read_text() == "v2\n"
    assert (tmp_path / "ran.prep").read_text().count("ran") == 2


def test_a_run_whose_driver_was_killed_shows_its_jobs_running_on_and_cancel_stops_and_journals_them(
    procjobs_site: Path, tmp_path: Path
) -> None:
    nap = f"sleep 6{time.monotonic_ns() % 10**6:06d}"  # a command line no other test runs
    (tmp_path / "pipeline.yaml").write_text(
        f"""name: left
steps:
  long: {{command: [sh, -c, "echo ran >> ran; {nap}"]}}
  after: {{command: [sh, -c, "echo ran >> ran.after"], needs: [long]}}
"""
    )
    driver = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "--engine", plugin.PROCJOBS, "pipeline.yaml"], cwd=tmp_path,
        env=plugin.plugin_env(procjobs_site), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while not (tmp_path / "ran").exists():
            assert driver.poll() is None and time.monotonic() < deadline, "long never started"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, 9)
        driver.wait()
    shown = _procjobs(procjobs_site, tmp_path, "status")
    assert "its runner died: this machine still runs 1 node" in shown.stdout, shown.stdout
    status = json.loads(_procjobs(procjobs_site, tmp_path, "status", "--json").stdout)
    assert status["state"] == "stopped" and _states(status) == {"long": "running", "after": "pending"}, status

    cancelled = _procjobs(procjobs_site, tmp_path, "cancel", status["run_id"], "--json")
    assert cancelled.returncode == 0, cancelled.stderr
    assert json.loads(cancelled.stdout)["stopped"] == ["long"], cancelled.stdout
    status = json.loads(_procjobs(procjobs_site, tmp_path, "status", "--json").stdout)
    assert status["state"] == "interrupted" and _states(status) == {"long": "interrupted", "after": "pending"}
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while subprocess.run(["pgrep", "-f", nap], capture_output=True, check=False).returncode == 0:
        assert time.monotonic() < deadline, f"the cancelled `{nap}` still runs"
        time.sleep(0.2)
    assert (tmp_path / "ran").read_text() == "ran\n" and not (tmp_path / "ran.after").exists()


def _states(status: dict[str, Any]) -> dict[str, str]:
    return {node["node"]: node["state"] for node in status["nodes"]}


def test_a_full_disk_stops_the_driver_in_one_line_and_a_resume_finishes(
    procjobs_site: Path,
    tmp_path: Path,
    small_disk: Path,  # noqa: F811
) -> None:
    runs = small_disk / "runs"
    # `fill` fills the run directory's filesystem (once); what the nodes after it write there no longer fits
    fill = f"test -f filled && exit 0; touch filled; cat /dev/zero > {small_disk}/filler 2>/dev/null; exit 0"
    after = "".join(f"  n{i}: {{command: [sh, -c, 'echo n{i} >> ran.log'], needs: [fill]}}\n" for i in range(30))
    (tmp_path / "pipeline.yaml").write_text(f'name: full\nsteps:\n  fill: {{command: [sh, -c, "{fill}"]}}\n{after}')
    args = ("--runs-dir", str(runs), "--no-cache")
    stopped = _procjobs(
        procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml", "--run-id", "full", *args
    )
    assert stopped.returncode == 2, stopped.stdout + stopped.stderr
    errors = [line for line in stopped.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "No space left on device" in errors[0] and "--resume full" in errors[0], errors
    assert f"cannot write under {runs}" in errors[0], errors  # the run directory's disk, said as such
    assert (runs / "full" / "journal.jsonl").read_bytes().endswith(b"\n"), "no torn last line"

    (small_disk / "filler").unlink()
    resumed = _procjobs(procjobs_site, tmp_path, "run", "--resume", "full", *args)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    status = json.loads(_procjobs(procjobs_site, tmp_path, "status", "full", "--runs-dir", str(runs), "--json").stdout)
    assert status["counts"] == {"succeeded": 31}
    assert sorted((tmp_path / "ran.log").read_text().split()) == sorted(f"n{i}" for i in range(30))


def test_an_executor_that_does_not_answer_for_a_while_is_asked_again_and_one_that_never_does_stops_the_driver(
    procjobs_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "pipeline.yaml").write_text(
        """name: unreachable
steps:
  only: {command: [sh, -c, "echo ran >> ran; sleep 1"]}
"""
    )
    args = ("run", "--engine", plugin.PROCJOBS, "pipeline.yaml")
    flaky = _procjobs(procjobs_site, tmp_path, *args, PROCJOBS_UNREACHABLE_LOOKS="4")  # the first looks fail
    assert flaky.returncode == 0, flaky.stderr
    assert flaky.stderr.count("could not look at its jobs (ConnectionRefusedError") == 1, flaky.stderr
    assert (tmp_path / "ran").read_text() == "ran\n"

    (tmp_path / "pipeline.yaml").write_text((tmp_path / "pipeline.yaml").read_text().replace("sleep 1", "sleep 2"))
    down = _procjobs(
        procjobs_site, tmp_path, *args, PROCJOBS_DOWN_AFTER_LOOKS="2", PROCJOBS_LOOK_GRACE_S="0"
    )  # fmt: skip
    assert down.returncode == 2 and "Traceback" not in down.stderr, down.stderr
    assert "the executor could not look at its jobs: ConnectionRefusedError" in down.stderr, down.stderr
    again = _procjobs(procjobs_site, tmp_path, *args)  # the same command: it takes over the job left running
    assert again.returncode == 0, again.stderr
    assert "continuing that run" in again.stderr, again.stderr
    assert (tmp_path / "ran").read_text() == "ran\nran\n"  # once for each of the two pipelines


@pytest.mark.parametrize("engine", ["local", plugin.PROCJOBS])
def test_a_node_out_of_checkpoint_restarts_fails_and_retries_as_its_step_says_on_every_scheduler(
    procjobs_site: Path, tmp_path: Path, engine: str
) -> None:
    (tmp_path / "pipeline.yaml").write_text(
        """name: restarts
steps:
  train:
    command: [sh, -c, "echo x >> epochs; exit 85"]
    checkpoint: {files: [epochs], exit_code: 85, max_restarts: 1}
    retries: 1
"""
    )
    done = _procjobs(procjobs_site, tmp_path, "run", "--engine", engine, "pipeline.yaml")
    assert done.returncode == 1, done.stderr
    train = _status(procjobs_site, tmp_path)["train"]
    assert (train["state"], train["attempts"]) == ("failed", 2), train
    assert "after 1 checkpoint restarts" in train["why"], train
    # one restart over the run, then a failed try, retried once: three starts
    assert (tmp_path / "epochs").read_text() == "x\nx\nx\n"


@pytest.mark.parametrize("engine", ["local", plugin.PROCJOBS])
def test_a_kill_9_between_a_successes_cache_entry_and_its_journal_event_does_not_run_it_again_on_every_scheduler(
    procjobs_site: Path, tmp_path: Path, engine: str
) -> None:
    """DAGFLOW_TEST_KILL_BETWEEN_WRITES (jobs/release.py `_commit`) SIGKILLs the driver after a success is in the
    cache index and before its end is in the journal, the one moment the two disagree. The node is the run's last,
    so nothing else makes the next plain run continue the killed one."""
    (tmp_path / "pipeline.yaml").write_text(
        """name: durable
steps:
  make:
    command: [sh, -c, 'echo make >> ran.log; echo made > made.txt']
    outputs: [made.txt]
"""
    )
    args = ("run", "--engine", engine, "pipeline.yaml")
    killed = _procjobs(procjobs_site, tmp_path, *args, DAGFLOW_TEST_KILL_BETWEEN_WRITES="1")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["make"]
    for _ in range(2):
        again = _procjobs(procjobs_site, tmp_path, *args)
        assert again.returncode == 0, again.stdout + again.stderr
        assert (tmp_path / "ran.log").read_text().split() == ["make"], "the finished node ran again"
        assert _status(procjobs_site, tmp_path)["make"]["state"] in ("succeeded", "cached")
    assert (tmp_path / "made.txt").read_text() == "made\n"


def test_a_resume_on_a_journal_with_malformed_lines_says_so_once_and_finishes(
    procjobs_site: Path, tmp_path: Path
) -> None:
    (tmp_path / "pipeline.yaml").write_text(
        """name: torn
steps:
  a: {command: [sh, -c, 'echo a >> ran.log']}
  b: {command: [sh, -c, 'echo b >> ran.log; test -f ok'], needs: [a]}
"""
    )
    first = _procjobs(procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml", "--json")
    assert first.returncode == 1, first.stderr
    run_id = json.loads(first.stdout.splitlines()[-1])["run_id"]
    journal = tmp_path / ".dagflow" / "runs" / run_id / "journal.jsonl"
    with journal.open("a") as torn:
        torn.write('{"e": "end", "n": "b"}\n["not", "an", "event"]\n{"e": "sta')  # the torn last line is cut off
    (tmp_path / "ok").touch()
    resumed = _procjobs(procjobs_site, tmp_path, "run", "--resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stderr.count("skipped 2 malformed line(s)") == 1, resumed.stderr
    assert (tmp_path / "ran.log").read_text().split() == ["a", "b", "b"]


@pytest.mark.parametrize("engine", ["local", plugin.PROCJOBS])
def test_a_job_left_running_whose_parent_runs_again_after_an_edit_is_not_taken_over_on_every_scheduler(
    procjobs_site: Path, tmp_path: Path, engine: str
) -> None:
    """A driver is killed while `b` runs; then `a`'s input is edited, so the resume runs `a` again. The job `b`
    left runs on `a`'s old output: it is stopped, and `b` runs once, after `a`'s new end."""
    (tmp_path / "pipeline.yaml").write_text(
        """name: stale
steps:
  a:
    command: [sh, -c, 'cat input.txt > a.out']
    inputs: [input.txt]
    outputs: [a.out]
  b:
    command: [sh, -c, 'echo b >> started; while [ ! -f go ]; do sleep 0.1; done; cat a.out > b.out']
    needs: [a]
"""
    )
    (tmp_path / "input.txt").write_text("v1\n")
    driver = subprocess.Popen(
        [sys.executable, "-m", "dagflow", "run", "--engine", engine, "pipeline.yaml", "--run-id", "stale"],
        cwd=tmp_path, env=plugin.plugin_env(procjobs_site), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    journal = tmp_path / ".dagflow" / "runs" / "stale" / "journal.jsonl"
    try:
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while not ((tmp_path / "started").exists() and ("a", "succeeded") in _ends(journal)):
            assert driver.poll() is None and time.monotonic() < deadline, "b never started"
            time.sleep(0.2)
    finally:
        driver.kill()
        driver.wait()
    (tmp_path / "input.txt").write_text("v2\n")
    (tmp_path / "go").touch()
    resumed = _procjobs(procjobs_site, tmp_path, "run", "--resume", "stale")
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "b.out").read_text() == "v2\n"
    ends = _ends(journal)
    assert ends == [("a", "succeeded"), ("a", "succeeded"), ("b", "succeeded")], ends


def _ends(journal: Path) -> list[tuple[str, str]]:
    """The journal's node ends so far, (node, state), in order (a line being written is not one yet)."""
    ends = []
    for line in journal.read_text().splitlines() if journal.exists() else []:
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("e") == "end":
                ends.append((event["n"], event["s"]))
    return ends


def test_a_search_runs_its_trials_through_a_job_executor(procjobs_site: Path, tmp_path: Path) -> None:
    """`dagflow search run --engine <a job executor>`: each trial is a run the job scheduler drives, and the search
    reads its metrics back from the run directory as on every engine."""
    write_pipeline(tmp_path / "p", budget=3, parallel=2, optimizer="random")
    searched = _procjobs(procjobs_site, tmp_path, "search", "run", "p/pipeline.yaml", "--engine", plugin.PROCJOBS,
                         "--poll", "0.05")  # fmt: skip
    assert searched.returncode == 0, searched.stdout + searched.stderr
    shown = json.loads(_procjobs(procjobs_site, tmp_path, "search", "status", "quad", "--json").stdout)
    trials = shown["trials"]
    assert [(t["state"], t["engine"]) for t in trials] == [("succeeded", plugin.PROCJOBS)] * 3, trials
    assert all(isinstance(t["value"], float) for t in trials), trials
    for trial in trials:  # each trial's run was driven by the job scheduler: its journal ends with the run's finish
        events = _journal_lines(tmp_path / ".dagflow" / "runs" / trial["run_id"] / "journal.jsonl")
        assert events[-1] == {**events[-1], "e": "finish", "s": "succeeded"}, events[-1]


def _journal_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_jobs_caps_how_many_jobs_a_job_executor_runs_at_once(procjobs_site: Path, tmp_path: Path) -> None:
    """`--jobs N` on a job executor, as on the local engine: never more than N of the run's jobs at once (each
    node holds a directory while it runs; a second one finding it taken says so)."""
    (tmp_path / "pipeline.yaml").write_text(
        """name: capped
matrix:
  part: [p1, p2, p3]
steps:
  work:
    command: [sh, -c, 'mkdir busy 2>/dev/null || echo {part} >> overlapped; sleep 0.5; rmdir busy; echo {part} >> ran']
"""
    )
    done = _procjobs(procjobs_site, tmp_path, "run", "--engine", plugin.PROCJOBS, "pipeline.yaml", "--jobs", "1")
    assert done.returncode == 0, done.stderr
    assert sorted((tmp_path / "ran").read_text().split()) == ["p1", "p2", "p3"]
    assert not (tmp_path / "overlapped").exists(), (tmp_path / "overlapped").read_text()
