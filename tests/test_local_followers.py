"""Followers: a ready node the keeper starts in a slot the moment the node there exits (keeper.py), so a
DAG of short nodes does not wait for the runner's round trip per node.

The keeper's side is driven through its own pipe protocol here; the runner's side through `dagflow run`:
a follower queued behind a node that runs on starts elsewhere when a slot frees, Ctrl-C drops a follower
that has not started, and a kill -9 of the runner leaves it unstarted for the resume to run once.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from test_local_support import cli_env, dagflow_cli, node, step
from test_run_cli import journal_of, start_runner, succeeded, wait_for, write_plan

from dagflow.engines.local.keeper import read_replies, request
from dagflow.engines.local.procs import start_keeper

WAIT_FOR_FILE = "while [ ! -f {flag} ]; do sleep 0.05; done"


class KeeperDriver:
    """A keeper of our own: requests written as the runner writes them, replies read in order."""

    def __init__(self, run_dir: Path, workdir: Path) -> None:
        (run_dir / "logs").mkdir(parents=True)
        self.run_dir = run_dir
        self.child, self.requests, self.replies_fd = start_keeper(run_dir, str(workdir), cli_env())
        self.buffer = bytearray()
        self.replies: list[tuple] = []
        self.all_replies: list[tuple] = []  # with their values

    def send(self, *messages: tuple) -> None:
        os.write(self.requests, b"".join(request(*message) for message in messages))

    def start(
        self, name: str, script: str, after: tuple[str, int] | None = None, env: dict | None = None, attempt: int = 1
    ) -> None:
        self.send(("s", name, attempt, ("/bin/sh", ["sh", "-c", script], env or {}, after)))

    def records(self) -> list[dict]:
        return [json.loads(line) for line in (self.run_dir / "procs.jsonl").read_text().splitlines()]

    def until(self, kind: str, name: str, timeout: float = 60.0, attempt: int | None = None) -> list[tuple]:
        """Read replies until (kind, name[, attempt]) comes; every reply read so far, in order."""
        while not any(r[0] == kind and r[1] == name and attempt in (None, r[2]) for r in self.replies):
            ready, _, _ = select.select([self.replies_fd], [], [], timeout)
            assert ready, f"no {kind} {name} from the keeper; replies so far: {self.replies}"
            chunk = os.read(self.replies_fd, 1 << 16)
            assert chunk, f"the keeper exited before {kind} {name}; replies: {self.replies}"
            self.buffer += chunk
            whole = read_replies(self.buffer)
            self.all_replies += whole
            self.replies += [tuple(reply[:3]) for reply in whole]
        return self.replies

    def close(self) -> int:
        os.close(self.requests)
        _, status = os.waitpid(self.child.pid, 0)
        os.close(self.replies_fd)
        return os.waitstatus_to_exitcode(status)

    def started(self) -> list[str]:
        lines = [json.loads(line) for line in (self.run_dir / "procs.jsonl").read_text().splitlines()]
        return [line["n"] for line in lines if "rc" not in line]


def test_a_follower_starts_when_its_leader_exits_and_not_before(tmp_path: Path) -> None:
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    keeper.start("lead", WAIT_FOR_FILE.format(flag="go"))
    keeper.start("follow", "true", after=("lead", 1))
    keeper.start("marker", "true")  # handled after the follower's request: by then it is queued
    replies = keeper.until("x", "marker")
    assert ("s", "follow", 1) not in replies
    (tmp_path / "go").touch()
    replies = keeper.until("x", "follow")
    assert replies.index(("x", "lead", 1)) < replies.index(("s", "follow", 1))
    assert keeper.close() == 0
    assert keeper.started() == ["lead", "marker", "follow"]


def test_start_now_and_drop_of_waiting_followers(tmp_path: Path) -> None:
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    keeper.start("lead", WAIT_FOR_FILE.format(flag="go"))
    keeper.start("early", "true", after=("lead", 1))
    keeper.send(("n", "early", 1, None))  # a slot freed elsewhere: it starts while its leader runs on
    keeper.until("x", "early")
    keeper.start("dropped", "echo ran >> dropped.txt", after=("lead", 1))
    keeper.start("after-dropped", "echo ran >> dropped.txt", after=("dropped", 1))  # dropped with it
    keeper.send(("d", "dropped", 1, None))
    replies = keeper.until("d", "after-dropped")
    assert ("d", "dropped", 1) in replies
    keeper.send(("n", "early", 1, None), ("d", "early", 1, None))  # too late for both: nothing happens
    (tmp_path / "go").touch()
    keeper.until("x", "lead")
    assert keeper.close() == 0
    assert not (tmp_path / "dropped.txt").exists()
    assert keeper.started() == ["lead", "early"]


@pytest.mark.slow
def test_a_drop_written_before_the_leader_is_killed_stops_its_follower(tmp_path: Path) -> None:
    # Ctrl-C's order in the runner: drop the waiting follower, then signal its leader. The keeper must
    # honour the drop even when it had already read its requests for this turn when the leader died (it
    # was awake copying the leader's output). Before it read them again, keeper.py started about 1 in 10.
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    talker = "while :; do echo talking; done"
    for i in range(60):
        keeper.start(f"lead{i}", talker)
        keeper.start(f"next{i}", f"touch ran.{i}", after=(f"lead{i}", 1))
        keeper.until("s", f"lead{i}")
        pid = next(r[3] for r in keeper.all_replies if r[:2] == ("s", f"lead{i}"))
        time.sleep(0.06)  # long enough that the keeper watches its output, waking for each chunk
        keeper.send(("d", f"next{i}", 1, None))
        os.killpg(pid, signal.SIGKILL)
        keeper.until("x", f"lead{i}")
    assert keeper.close() == 0
    assert [f"next{i}" for i in range(60) if ("d", f"next{i}", 1) not in keeper.replies] == []
    assert list(tmp_path.glob("ran.*")) == []
    assert keeper.started() == [f"lead{i}" for i in range(60)]


def test_followers_are_forgotten_when_the_runner_goes(tmp_path: Path) -> None:
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    keeper.start("lead", WAIT_FOR_FILE.format(flag="go"))
    keeper.start("orphan", "echo ran > orphan.txt", after=("lead", 1))
    keeper.until("s", "lead")
    os.close(keeper.requests)  # what a killed runner leaves: end of file on the request pipe
    keeper.requests = os.open(os.devnull, os.O_WRONLY)
    (tmp_path / "go").touch()
    assert keeper.close() == 0  # it exits once its node has, telling no one: nothing else was started
    assert not (tmp_path / "orphan.txt").exists()
    assert keeper.started() == ["lead"]


def test_names_environment_logs_and_records_of_a_node(tmp_path: Path) -> None:
    # What the runner gives a node (a name with JSON's special characters, environment additions that
    # override an inherited variable) and what the keeper writes back: records, logs, replies.
    name = 'we"ird\\näme\tnode'
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    script = 'echo "$EXTRA $HOME"; echo oops >&2; exit 3'
    keeper.start(name, script, env={"EXTRA": "a=b c", "HOME": "/elsewhere"})
    keeper.until("x", name)
    keeper.start(name, "echo again", attempt=2)
    replies = keeper.until("x", name, attempt=2)
    assert keeper.close() == 0
    records = keeper.records()
    expected = [(name, 1, None), (name, 1, 3), (name, 2, None), (name, 2, 0)]
    assert [(r["n"], r["a"], r.get("rc")) for r in records] == expected
    assert records[0]["pid"] == records[1]["pid"] and records[0]["k"] != records[0]["pid"]
    assert all(isinstance(records[1][key], float | int) for key in ("w", "c", "m", "t"))
    assert [reply[:3] for reply in replies] == [("s", name, 1), ("x", name, 1), ("s", name, 2), ("x", name, 2)]
    logs = tmp_path / "run" / "logs"
    assert (logs / f"{name}.out").read_text() == "a=b c /elsewhere\n\n=== dagflow: attempt 2 ===\nagain\n"
    assert (logs / f"{name}.err").read_text() == "oops\n"


def test_a_node_that_cannot_start_says_why_and_its_follower_takes_the_slot(tmp_path: Path) -> None:
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    keeper.send(("s", "gone", 1, ("/nonexistent/program", ["program"], {}, None)))
    keeper.start("lead", WAIT_FOR_FILE.format(flag="go"))
    keeper.send(("s", "missing", 1, ("/nonexistent/program", ["program"], {}, ("lead", 1))))
    keeper.start("next", "true", after=("missing", 1))
    (tmp_path / "go").touch()
    keeper.until("x", "next")
    assert keeper.close() == 0
    errors = [reply for reply in keeper.all_replies if reply[0] == "e"]
    assert errors == [("e", "gone", 1, "No such file or directory"), ("e", "missing", 1, "No such file or directory")]
    assert keeper.started() == ["lead", "next"]


def test_a_log_that_cannot_be_written_loses_the_output_not_the_node(tmp_path: Path) -> None:
    # As on a full disk: the node's stdout log cannot be created (here a directory holds its name). Its
    # output is dropped, its stderr still logged, and its exit recorded, whether the keeper reads the
    # output while the node runs (after 50 ms) or at its exit.
    keeper = KeeperDriver(tmp_path / "run", tmp_path)
    (tmp_path / "run" / "logs" / "talker.out").mkdir()
    keeper.start("talker", "echo early; sleep 0.3; echo late; echo note >&2; sleep 0.2; echo last")
    keeper.until("x", "talker")
    assert keeper.close() == 0
    assert [(r["n"], r.get("rc")) for r in keeper.records()] == [("talker", None), ("talker", 0)]
    assert (tmp_path / "run" / "logs" / "talker.err").read_text() == "note\n"


def test_a_nul_byte_is_refused_before_it_reaches_the_keeper() -> None:
    with pytest.raises(ValueError, match="null byte"):
        request("s", "n", 1, ("/bin/sh", ["sh", "-c", "echo a\0b"], {}, None))


def test_short_nodes_do_not_wait_behind_a_long_one(tmp_path: Path) -> None:
    # The long node has the higher priority, so it is started first; followers are given to the nodes
    # running. One waiting behind the long node starts as soon as another slot frees.
    count = 'echo "$DAGFLOW_NODE" >> counter'
    nodes = [node("long", "long", f"{count}; {WAIT_FOR_FILE.format(flag='go')}")]
    nodes += [node(f"q{i}", "s", count) for i in range(8)]
    plan = write_plan(tmp_path, nodes)
    runner = start_runner(tmp_path, str(plan), "--run-id", "f", "--jobs", "2", "--no-cache")
    try:
        wait_for(lambda: succeeded(tmp_path, "f") >= {f"q{i}" for i in range(8)}, timeout=120)
        assert "long" not in succeeded(tmp_path, "f")
    finally:
        (tmp_path / "go").touch()
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, out + err
    assert Counter((tmp_path / "counter").read_text().split()) == Counter([f"q{i}" for i in range(8)] + ["long"])


def _one_slot_with_a_follower(tmp_path: Path) -> tuple[object, Path]:
    count = 'echo "$DAGFLOW_NODE" >> counter'
    nodes = [node("lead", "s", f"{count}; {WAIT_FOR_FILE.format(flag='go')}"), node("next", "s", count)]
    plan = write_plan(tmp_path, nodes, [step("s")])
    # one slot: `next` is sent as the follower of `lead` in the same write that starts `lead`
    runner = start_runner(tmp_path, str(plan), "--run-id", "one", "--jobs", "1", "--no-cache", "--kill-grace", "0.5")
    # The journal records `lead` when the keeper starts it; its shell may not have run a line yet. Wait
    # for `lead` itself, or a signal could end it before it counts itself.
    counter = tmp_path / "counter"
    wait_for(lambda: counter.exists() and counter.read_text().split() == ["lead"], timeout=120)
    return runner, plan


def test_ctrl_c_drops_a_follower_that_has_not_started(tmp_path: Path) -> None:
    runner, _ = _one_slot_with_a_follower(tmp_path)
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 130, out + err
    states = {name: record.state for name, record in journal_of(tmp_path, "one").nodes.items()}
    assert states == {"lead": "interrupted"}  # `next` never started: nothing of it is journaled
    assert (tmp_path / "counter").read_text().split() == ["lead"]  # `next` never ran
    (tmp_path / "go").touch()
    resumed = dagflow_cli("run", "--resume", "one", "--no-cache", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert Counter((tmp_path / "counter").read_text().split()) == {"lead": 2, "next": 1}


def test_ctrl_c_journals_no_attempt_for_the_nodes_that_waited(tmp_path: Path) -> None:
    # #43 item 5: nodes that never started were shown and journaled `interrupted ... 9.0s`, rc -15, as if
    # they had run and been killed. Here w0 and w1 wait in the keeper behind `lead`, w2 in the ready queue.
    count = 'echo "$DAGFLOW_NODE" >> counter'
    nodes = [node("lead", "s", f"{count}; {WAIT_FOR_FILE.format(flag='go')}")]
    nodes += [node(f"w{i}", "s", count) for i in range(3)]
    plan = write_plan(tmp_path, nodes, [step("s")])
    runner = start_runner(tmp_path, str(plan), "--run-id", "w", "--jobs", "1", "--no-cache", "--kill-grace", "0.5")
    counter = tmp_path / "counter"
    wait_for(lambda: counter.exists() and counter.read_text().split() == ["lead"], timeout=120)
    runner.send_signal(signal.SIGINT)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 130, out + err
    journal = journal_of(tmp_path, "w")
    assert list(journal.nodes) == ["lead"], {name: record.state for name, record in journal.nodes.items()}
    lead = journal.nodes["lead"]
    assert lead.state == "interrupted" and lead.attempts == 1 and lead.rc is not None
    shown = [line for line in (out + err).splitlines() if "interrupted" in line and re.search(r"\bw[0-2]\b", line)]
    assert shown == [] and "3 pending, 1 interrupted" in out + err, out + err
    status = dagflow_cli("status", "w", "--json", cwd=tmp_path)
    states = {entry["node"]: entry["state"] for entry in json.loads(status.stdout)["nodes"]}
    assert states == {"lead": "interrupted", "w0": "pending", "w1": "pending", "w2": "pending"}
    (tmp_path / "go").touch()
    resumed = dagflow_cli("run", "--resume", "w", "--no-cache", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert Counter(counter.read_text().split()) == {"lead": 2, "w0": 1, "w1": 1, "w2": 1}


@pytest.mark.slow
def test_kill_9_of_the_runner_leaves_a_waiting_follower_for_the_resume(tmp_path: Path) -> None:
    runner, _ = _one_slot_with_a_follower(tmp_path)
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=60)
    (tmp_path / "go").touch()  # `lead` ends with no runner alive; its keeper records the exit
    procs = tmp_path / ".dagflow" / "runs" / "one" / "procs.jsonl"
    wait_for(lambda: any('"rc"' in line for line in procs.read_text().splitlines()), timeout=120)
    resumed = dagflow_cli("run", "--resume", "one", "--no-cache", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert Counter((tmp_path / "counter").read_text().split()) == {"lead": 1, "next": 1}


# Counts the nodes running at once under a lock, the way a node sees it: entering and leaving.
CONCURRENCY = (
    '( flock 9; n=$(cat running 2>/dev/null || echo 0); n=$((n+1)); echo $n > running; echo $n >> seen ) 9>lock; '
    "sleep {sleep}; "
    '( flock 9; n=$(cat running); echo $((n-1)) > running ) 9>lock; '
    'echo "$DAGFLOW_NODE" >> counter'
)
FAIL_ONCE = 'test -f "ran.$DAGFLOW_NODE" || { touch "ran.$DAGFLOW_NODE"; exit 3; }; '


@pytest.mark.parametrize("jobs", [1, 2, 3])
@pytest.mark.slow
def test_never_more_nodes_at_once_than_slots_and_each_runs_to_success_once(tmp_path: Path, jobs: int) -> None:
    # Chains, a fan-in and a fan-out with nodes of mixed lengths, some failing once (a retry), a long one
    # with the higher priority: followers wait behind long and short leaders, some start early.
    sleeps = ["0", "0.02", "0", "0.1", "0", "0", "0.05"]
    nodes = [node("long", "long", CONCURRENCY.format(sleep="0.5"))]
    names = []
    for i in range(36):
        parents = [names[i - 6]] if i >= 6 else []
        script = CONCURRENCY.format(sleep=sleeps[i % len(sleeps)])
        if i % 5 == 4:
            script = FAIL_ONCE + script
        names.append(f"n{i:02d}")
        nodes.append(node(names[-1], "s", script, parents=parents))
    nodes.append(node("gather", "s", CONCURRENCY.format(sleep="0"), parents=names[-6:]))
    nodes += [node(f"after{i}", "s", CONCURRENCY.format(sleep="0"), parents=["gather"]) for i in range(6)]
    plan = write_plan(tmp_path, nodes, [step("s", retries=1), step("long", priority=10)])
    done = dagflow_cli("run", str(plan), "--run-id", "c", "--jobs", str(jobs), "--no-cache", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = [int(value) for value in (tmp_path / "seen").read_text().split()]
    assert max(seen) <= jobs, f"{max(seen)} nodes ran at once with --jobs {jobs}"
    runs = Counter((tmp_path / "counter").read_text().split())
    assert runs == Counter([node.name for node in nodes]), runs  # each succeeded exactly once
