"""The engine contract, by behaviour: the same small pipelines on every engine that can run here.

Each test goes through the registry and the command line exactly as a user does (`dagflow run|submit
--engine E`, `dagflow status|cancel RUN`, `dagflow run --resume RUN`) and checks the same outcome on every
engine: success, a failing branch that stops only its descendants while the healthy branch finishes,
retries with `unless_exit`, cancel, resume after a fix, and `dagflow status` agreeing with the engine's own
view of a running node. The only engine-specific code is that probe of the engine's own view (the keeper's
process record for local, squeue, qstat -xml, condor_q). An engine whose cluster cannot run here skips
with its fixture's reason.

Waits are generous and only stop a hang: the clusters share a small, loaded machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import engine_plugin as plugin
import pytest

from dagflow.engines.registry import engine_class, engine_names
from tests.run_dir_support import entries, read_only

WAIT_S = 600.0
CLI_TIMEOUT_S = 900.0
SMALL = "{memory: 64MB, disk: 10MB}"  # the test pool's slots are small; every engine accepts this


@dataclass
class Engine:
    """One engine, ready to run pipelines from the command line in directories it can use."""

    name: str
    new_workdir: Callable[[str], Path]
    cli: Callable[[list[str], Path], subprocess.CompletedProcess[str]]
    handover: Callable[[Path], None]  # make what the test wrote readable/writable by the engine's jobs
    own_view: Callable[[Path, str, str], str | None]  # (workdir, run id, node) -> running|queued|held|None
    spawn: Callable[[list[str], Path], subprocess.Popen[str]]  # `dagflow ARGS` in the background, its own session
    argv: Callable[[list[str]], list[str]]  # the command line of `dagflow ARGS` as cli runs it (its user, its env)
    root_env: dict[str, str] | None = None  # the environment `dagflow` needs run as root (None: this one)


def _local_argv(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    given = [f"{key}={value}" for key, value in (env or {}).items()]
    return [*(["env", *given] if given else []), sys.executable, "-m", "dagflow", *args]


def _local_cli(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, capture_output=True, text=True, check=False,
        timeout=CLI_TIMEOUT_S, env=env,
    )  # fmt: skip


def _local_spawn(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return _spawn([sys.executable, "-m", "dagflow", *args], cwd, env)


def _spawn(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True,
        start_new_session=True,
    )  # fmt: skip


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _local_view(workdir: Path, run_id: str, node: str) -> str | None:
    """The keeper's process record (procs.jsonl): a start with no exit, its process alive, is running."""
    procs = workdir / ".dagflow" / "runs" / run_id / "procs.jsonl"
    started: dict[str, Any] | None = None
    for line in procs.read_text().splitlines() if procs.exists() else []:
        record = json.loads(line)
        if record.get("n") == node:
            started = None if "rc" in record else record
    return "running" if started is not None and _alive(int(started["pid"])) else None


# squeue --format=%T / qstat -xml state letters / condor JobStatus -> the words the tests compare
_SLURM_STATES = {"RUNNING": "running", "COMPLETING": "running", "PENDING": "queued", "CONFIGURING": "queued"}
_CONDOR_STATES = {"1": "queued", "2": "running", "5": "held"}


def _slurm_view(workdir: Path, run_id: str, node: str) -> str | None:
    done = subprocess.run(
        ["squeue", "--noheader", "--array", "--format=%j|%T"], capture_output=True, text=True, check=True,
        timeout=120,
    )  # fmt: skip
    for line in done.stdout.splitlines():
        name, _, state = line.strip().partition("|")
        if name == f"{node}:{run_id}":  # a step without matrix axes is one job named step:run
            return _SLURM_STATES.get(state, state.lower())
    return None


def _sge_view(workdir: Path, run_id: str, node: str) -> str | None:
    done = subprocess.run(["qstat", "-xml"], capture_output=True, text=True, check=True, timeout=120)
    wanted = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{node}.{run_id}")
    for job in ElementTree.fromstring(done.stdout).iter("job_list"):
        if job.findtext("JB_name") == wanted:
            state = job.findtext("state") or ""
            if "h" in state or "w" in state:
                return "queued"
            return "running" if state in ("r", "t") else state
    return None


def _condor_view(pool: Any, node_attribute: str = "DAGNodeName") -> Callable[[Path, str, str], str | None]:
    """condor_q's JobStatus of the run's job of a node, which the job names in node_attribute (DAGMan's
    DAGNodeName; the htjobs executor's DagflowNode)."""

    def view(workdir: Path, run_id: str, node: str) -> str | None:
        constraint = f'DagflowRunId == "{run_id}" && {node_attribute} == "{node}"'
        done = pool.run(["condor_q", "-constraint", constraint, "-af", "JobStatus"])
        codes = done.stdout.split()
        return _CONDOR_STATES.get(codes[0], f"JobStatus {codes[0]}") if codes else None

    return view


def _plain_engine(
    name: str,
    tmp_path: Path,
    view: Callable[[Path, str, str], str | None],
    cli: Callable[[list[str], Path], subprocess.CompletedProcess[str]] = _local_cli,
    spawn: Callable[[list[str], Path], subprocess.Popen[str]] = _local_spawn,
    argv: Callable[[list[str]], list[str]] = _local_argv,
    root_env: dict[str, str] | None = None,
) -> Engine:
    def new_workdir(label: str) -> Path:
        path = tmp_path / label
        path.mkdir()
        return path

    return Engine(name, new_workdir, cli, lambda _path: None, view, spawn, argv, root_env)


ENGINES = [
    pytest.param("local", id="local"),  # in the fast subset: the contract every engine is held to
    pytest.param("slurm", id="slurm", marks=pytest.mark.cluster),
    pytest.param("sge", id="sge", marks=pytest.mark.cluster),
    pytest.param("condor", id="condor", marks=[pytest.mark.cluster, pytest.mark.condor_pool]),
    # an engine installed from a package outside dagflow: the local engine under another name, so the fast
    # subset leaves it to the full suite (tests/test_engine_registry.py drives a plugin engine there too)
    pytest.param(plugin.NAME, id="plugin", marks=pytest.mark.slow),
    # a job executor installed from outside dagflow (tests/plugins/htjobs): each node one HTCondor job through
    # the schedd, no DAGMan, driven by dagflow's own DAG scheduler (dagflow/engines/jobs/)
    pytest.param(plugin.HTJOBS, id="htjobs", marks=[pytest.mark.cluster, pytest.mark.condor_pool]),
    # the smallest job executor (tests/plugins/procjobs: each node a detached process here), so the fast subset
    # holds dagflow's scheduler to the contract without a pool
    pytest.param(plugin.PROCJOBS, id="procjobs"),
]


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin.install_plugin(tmp_path_factory.mktemp("plugin"))


@pytest.fixture(scope="session")
def procjobs_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return plugin.install_source(plugin.PROCJOBS_SOURCE, tmp_path_factory.mktemp("procjobs") / "site")


def _procjobs_view(workdir: Path, run_id: str, node: str) -> str | None:
    """The executor's own record: a job directory with a live wrapper and no exit code is running."""
    running = None
    for job_dir in (workdir / ".dagflow" / "runs" / run_id / "procjobs").glob(f"{node}.*"):
        pid = job_dir / "pid"
        if pid.exists() and not (job_dir / "rc").exists() and _alive(int(pid.read_text())):
            running = "running"
    return running


@pytest.fixture(scope="session")
def htjobs_site(condor_pool: Any) -> Path:
    """The htjobs executor, installed where the pool's user (who runs dagflow and its jobs) can import it."""
    return plugin.install_source(plugin.HTJOBS_SOURCE, condor_pool.work / f"htjobs-site-{os.getpid()}")


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    name: str = request.param
    if name == "local":
        return _plain_engine(name, tmp_path, _local_view)
    if name == "slurm":
        request.getfixturevalue("slurm_cluster")
        return _plain_engine(name, tmp_path, _slurm_view)
    if name == "sge":
        request.getfixturevalue("sge_cluster")
        return _plain_engine(name, tmp_path, _sge_view)
    if name in (plugin.NAME, plugin.PROCJOBS):
        site = request.getfixturevalue("plugin_site" if name == plugin.NAME else "procjobs_site")
        env = plugin.plugin_env(site)
        return _plain_engine(
            name, tmp_path, _local_view if name == plugin.NAME else _procjobs_view,
            lambda args, cwd: _local_cli(args, cwd, env),
            lambda args, cwd: _local_spawn(args, cwd, env), lambda args: _local_argv(args, env), env,
        )  # fmt: skip
    pool = request.getfixturevalue("condor_pool")
    if name == plugin.HTJOBS:
        extra = {"PYTHONPATH": str(request.getfixturevalue("htjobs_site"))}
        return Engine(
            name,
            pool.workdir,
            lambda args, cwd: pool.dagflow(args, cwd=cwd, check=False, timeout=CLI_TIMEOUT_S, env=extra),
            pool.give,
            _condor_view(pool, "DagflowNode"),
            lambda args, cwd: _spawn(pool._as_user([sys.executable, "-m", "dagflow", *args], extra), cwd),
            lambda args: pool._as_user([sys.executable, "-m", "dagflow", *args], extra),
            {**os.environ, **pool.env, **extra},
        )
    return Engine(
        name,
        pool.workdir,
        lambda args, cwd: pool.dagflow(args, cwd=cwd, check=False, timeout=CLI_TIMEOUT_S),
        pool.give,
        _condor_view(pool),
        lambda args, cwd: _spawn(pool._as_user([sys.executable, "-m", "dagflow", *args], None), cwd),
        lambda args: pool._as_user([sys.executable, "-m", "dagflow", *args], None),
        {**os.environ, **pool.env},
    )


def test_every_registered_builtin_engine_is_covered() -> None:
    covered = {param.values[0] for param in ENGINES}
    assert set(engine_names()) <= covered, "a registered engine has no contract coverage"
    assert {"local", "condor", "slurm", "sge", plugin.NAME, plugin.HTJOBS, plugin.PROCJOBS} <= covered
    plugins = {plugin.NAME, plugin.HTJOBS, plugin.PROCJOBS}  # installed for the tests that run them, not here
    for name in covered - plugins:
        assert engine_class(name).name == name


# --- helpers: everything through the command line ------------------------------------------------------------


def _write(engine: Engine, workdir: Path, text: str) -> None:
    """The pipeline, with @DIR@ standing for the directory's absolute path."""
    assert not set("{}@ ") & set(str(workdir)), workdir
    (workdir / "pipeline.yaml").write_text(text.replace("@DIR@", str(workdir)), encoding="utf-8")
    engine.handover(workdir)


def _json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), f"no output (exit {done.returncode}):\n{done.stderr}"
    return json.loads(done.stdout)


def _run(engine: Engine, workdir: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """`dagflow run ARGS --json`: its exit code and then `dagflow status RUN --json` of the run it ran.

    The last line `run --json` prints names the run and its end state on every engine (the local engine
    streams events before it, the batch engines print the final status)."""
    done = engine.cli(["run", *args, "--json"], workdir)
    assert done.returncode in (0, 1), f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    lines = done.stdout.strip().splitlines()
    assert lines, f"no output (exit {done.returncode}):\n{done.stderr}"
    last = json.loads(lines[-1])
    status = _status(engine, workdir, str(last["run_id"]))
    assert last["state"] == status["state"], (last, status)
    return done.returncode, status


def _submit(engine: Engine, workdir: Path, *args: str) -> str:
    done = engine.cli(["submit", "--engine", engine.name, "pipeline.yaml", "--json", *args], workdir)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    submitted = _json(done)
    assert submitted["engine"] == engine.name
    return str(submitted["run_id"])


def _status(engine: Engine, workdir: Path, run_id: str) -> dict[str, Any]:
    done = engine.cli(["status", run_id, "--json"], workdir)
    assert done.returncode in (0, 1), f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return _json(done)


def _states(status: dict[str, Any]) -> dict[str, str]:
    return {node["node"]: node["state"] for node in status["nodes"]}


def _shown(status: dict[str, Any]) -> str:
    """The run's nodes, for an assertion's message."""
    rows = [
        f"{node['node']}: {node['state']} attempts={node['attempts']} exit={node['exit_code']} why={node['why']}"
        for node in status["nodes"]
    ]
    return f"run {status['run_id']} {status['state']}: " + "; ".join(rows)


def _node(status: dict[str, Any], name: str) -> dict[str, Any]:
    return next(node for node in status["nodes"] if node["node"] == name)


def _eventually(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what}: not after {WAIT_S:.0f} s"
        time.sleep(1)


def _ended(engine: Engine, workdir: Path, run_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        status = _status(engine, workdir, run_id)
        return status if status["state"] not in ("running", "not-started", "pending") else None

    return _eventually(check, f"run {run_id} to end")


def _runs(workdir: Path, name: str) -> int:
    """How many times a node ran: each execution appends one line to ran.<name>."""
    path = workdir / f"ran.{name}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _ran(name: str, then: str = "true") -> str:
    """A command counting its runs in ran.<name>. Flags and counters are absolute paths: a job sees them in
    the one directory every engine here shares, whether or not it runs in a sandbox of its own (HTCondor's
    transfer data mode, the default); data between nodes goes through declared inputs and outputs."""
    return f'[sh, -c, "echo ran >> @DIR@/ran.{name}; {then}"]'


# --- the pipelines and what every engine must do with them -------------------------------------------------


SUCCESS = f"""name: success
matrix:
  shard: [a, b]
steps:
  make:
    command: [sh, -c, "echo {{shard}} > made.{{shard}}"]
    outputs: ["made.{{shard}}"]
    resources: {SMALL}
  use:
    command: [sh, -c, "cat made.{{shard}} > used.{{shard}}"]
    needs: [make]
    inputs: ["made.{{shard}}"]
    outputs: ["used.{{shard}}"]
    resources: {SMALL}
  gather:
    command: [sh, -c, "cat used.a used.b > gathered"]
    needs: [use]
    over: [shard]
    inputs: [used.a, used.b]
    outputs: [gathered]
    resources: {SMALL}
"""


def test_a_pipeline_succeeds_in_dependency_order(engine: Engine) -> None:
    workdir = engine.new_workdir("success")
    _write(engine, workdir, SUCCESS)
    code, result = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml")
    assert code == 0, _shown(result)
    assert (result["engine"], result["state"]) == (engine.name, "succeeded")
    assert set(_states(result).values()) == {"succeeded"} and len(result["nodes"]) == 5
    assert (workdir / "gathered").read_text() == "a\nb\n"
    shown = _status(engine, workdir, result["run_id"])
    assert (shown["engine"], shown["state"], _states(shown)) == (engine.name, "succeeded", _states(result))


BRANCHES = f"""name: branches
matrix:
  region: [us, br]
steps:
  train:
    command: {_ran("train.{region}", "test {region} != br || test -f @DIR@/fixed")}
    resources: {SMALL}
  evaluate: {{command: {_ran("evaluate.{region}")}, needs: [train], resources: {SMALL}}}
  report: {{command: {_ran("report")}, needs: [evaluate], over: [region], resources: {SMALL}}}
  side: {{command: {_ran("side", "sleep 2")}, over: [region], resources: {SMALL}}}
"""


def test_a_failure_stops_only_its_descendants_and_resume_runs_only_what_did_not_succeed(engine: Engine) -> None:
    workdir = engine.new_workdir("branches")
    _write(engine, workdir, BRANCHES)
    code, result = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml")
    assert code == 1, _shown(result)
    assert result["state"] == "failed"
    assert _states(result) == {
        "train.us": "succeeded",
        "train.br": "failed",
        "evaluate.us": "succeeded",
        "evaluate.br": "upstream_failed",
        "report": "upstream_failed",
        "side": "succeeded",
    }, _shown(result)
    assert _node(result, "train.br")["exit_code"] == 1
    assert (_runs(workdir, "evaluate.br"), _runs(workdir, "report"), _runs(workdir, "side")) == (0, 0, 1)

    (workdir / "fixed").touch()
    engine.handover(workdir)
    code, resumed = _run(engine, workdir, "--resume", result["run_id"])
    assert code == 0, _shown(resumed)
    assert (resumed["run_id"], resumed["engine"], resumed["state"]) == (result["run_id"], engine.name, "succeeded")
    assert set(_states(resumed).values()) == {"succeeded"}
    expected = {"train.us": 1, "evaluate.us": 1, "side": 1, "train.br": 2, "evaluate.br": 1, "report": 1}
    assert {name: _runs(workdir, name) for name in expected} == expected


EDITED = f"""name: edited
steps:
  prep: {{command: {_ran("prep")}, resources: {SMALL}}}
  train: {{command: {_ran("train.v1")}, needs: [prep], resources: {SMALL}}}
  evaluate: {{command: {_ran("evaluate")}, needs: [train], resources: {SMALL}}}
  side: {{command: {_ran("side")}, resources: {SMALL}}}
"""


def test_resume_after_editing_a_step_reruns_that_step_and_its_descendants_only(engine: Engine) -> None:
    workdir = engine.new_workdir("edited")
    _write(engine, workdir, EDITED)
    code, result = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml")
    assert code == 0 and result["state"] == "succeeded", _shown(result)

    _write(engine, workdir, EDITED.replace("train.v1", "train.v2"))  # the user fixes train's command
    code, resumed = _run(engine, workdir, "--resume", result["run_id"])
    assert code == 0, _shown(resumed)
    assert (resumed["run_id"], resumed["state"]) == (result["run_id"], "succeeded"), _shown(resumed)
    expected = {"prep": 1, "side": 1, "train.v1": 1, "train.v2": 1, "evaluate": 2}
    assert {name: _runs(workdir, name) for name in expected} == expected


RETRIES = f"""name: retries
steps:
  flaky:
    command: {_ran("flaky", "n=$(wc -l < @DIR@/ran.flaky); test $n -ge 3")}
    retries: {{count: 3, unless_exit: [2]}}
    resources: {SMALL}
  usage:
    command: {_ran("usage", "exit 2")}
    retries: {{count: 3, unless_exit: [2]}}
    resources: {SMALL}
  after_usage: {{command: {_ran("after_usage")}, needs: [usage], resources: {SMALL}}}
"""


def test_a_retryable_failure_is_retried_and_an_unless_exit_code_is_not(engine: Engine) -> None:
    workdir = engine.new_workdir("retries")
    _write(engine, workdir, RETRIES)
    code, result = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml")
    assert code == 1 and result["state"] == "failed", _shown(result)
    flaky, usage = _node(result, "flaky"), _node(result, "usage")
    assert (flaky["state"], flaky["attempts"], _runs(workdir, "flaky")) == ("succeeded", 3, 3), _shown(result)
    assert (usage["state"], usage["attempts"], usage["exit_code"], _runs(workdir, "usage")) == ("failed", 1, 2, 1)
    assert _node(result, "after_usage")["state"] == "upstream_failed"
    assert _runs(workdir, "after_usage") == 0


WAITING = f"""name: waiting
steps:
  first: {{command: [sh, -c, "while ! test -f @DIR@/go; do sleep 0.5; done"], resources: {SMALL}}}
  second: {{command: {_ran("second")}, needs: [first], resources: {SMALL}}}
"""

# dagflow's node state -> what the engine itself may say about that node's job at the same moment
_AGREES: dict[str, set[str | None]] = {"running": {"running"}, "pending": {"queued", None}}


def test_status_agrees_with_the_engines_own_view_of_a_running_node(engine: Engine) -> None:
    workdir = engine.new_workdir("waiting")
    _write(engine, workdir, WAITING)
    run_id = _submit(engine, workdir)
    try:
        _eventually(lambda: _states(_status(engine, workdir, run_id))["first"] == "running", "first running")
        # first waits for a file no one has written yet, so neither node can move while both views are read
        before = {node: engine.own_view(workdir, run_id, node) for node in ("first", "second")}
        status = _status(engine, workdir, run_id)
        after = {node: engine.own_view(workdir, run_id, node) for node in ("first", "second")}
        assert before == after
        assert status["state"] == "running" and _states(status) == {"first": "running", "second": "pending"}
        for node, state in _states(status).items():
            assert after[node] in _AGREES[state], (node, state, after)
    finally:
        (workdir / "go").touch()
        engine.handover(workdir)
    status = _ended(engine, workdir, run_id)
    assert status["state"] == "succeeded", _shown(status)
    assert _runs(workdir, "second") == 1
    assert {node: engine.own_view(workdir, run_id, node) for node in ("first", "second")} == {
        "first": None,
        "second": None,
    }


def _processes_running(marker: str) -> list[str]:
    done = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    return done.stdout.split()


def test_cancel_stops_a_running_node_through_the_engine(engine: Engine) -> None:
    workdir = engine.new_workdir("cancel")
    nap = f"sleep 3{time.monotonic_ns() % 10**6:06d}"  # a command line no other test runs
    _write(
        engine,
        workdir,
        f"""name: cancel
steps:
  long: {{command: [sh, -c, "{nap}"], resources: {SMALL}}}
  after: {{command: {_ran("after")}, needs: [long], resources: {SMALL}}}
""",
    )
    run_id = _submit(engine, workdir)
    _eventually(lambda: engine.own_view(workdir, run_id, "long") == "running", "the engine running long")
    _eventually(lambda: _states(_status(engine, workdir, run_id))["long"] == "running", "status showing long")

    done = engine.cli(["cancel", run_id, "--json"], workdir)
    assert done.returncode == 0, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    status = _ended(engine, workdir, run_id)
    assert status["state"] == "interrupted", _shown(status)
    assert _states(status) == {"long": "interrupted", "after": "pending"}, _shown(status)
    _eventually(lambda: engine.own_view(workdir, run_id, "long") is None, "the engine to drop long")
    _eventually(lambda: not _processes_running(nap), f"the cancelled node's `{nap}` gone")
    assert _runs(workdir, "after") == 0


# --- a node runs in at most one live run at a time (dagflow/run/live_runs.py) ---------------------------------

_WAIT_GO = "while ! test -f @DIR@/go.{region}; do sleep 0.5; done"  # until the test writes go.<region>
LIVE = f"""name: live
matrix:
  region: [us, br]
steps:
  fetch: {{command: {_ran("fetch.{region}", _WAIT_GO)}, resources: {SMALL}}}
  train: {{command: {_ran("train.{region}")}, needs: [fetch], resources: {SMALL}}}
"""
LIVE_NODES = ("fetch.us", "fetch.br", "train.us", "train.br")


def _go(engine: Engine, workdir: Path, *regions: str) -> None:
    for region in regions:
        (workdir / f"go.{region}").touch()
    engine.handover(workdir)


def _refused(done: subprocess.CompletedProcess[str], run_id: str, *nodes: str) -> None:
    assert done.returncode == 2, f"exit {done.returncode}:\n{done.stdout}\n{done.stderr}"
    assert f"run {run_id} " in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert f"dagflow cancel {run_id}" in done.stderr, done.stderr
    for node in nodes:
        assert node in done.stderr, done.stderr


def _run_ids(workdir: Path) -> list[str]:
    root = workdir / ".dagflow" / "runs"
    return sorted(path.parent.name for path in root.glob("*/plan.json"))


def _runners(workdir: Path, run_id: str) -> int:
    """How many runners (or submissions) the run's journal records; 0 for an engine that keeps none."""
    journal = workdir / ".dagflow" / "runs" / run_id / "journal.jsonl"
    lines = journal.read_text().splitlines() if journal.exists() else []
    return sum(1 for line in lines if line.startswith('{"e":"run"'))


def test_a_live_run_refuses_every_second_run_that_shares_its_nodes(engine: Engine) -> None:
    workdir = engine.new_workdir("live")
    _write(engine, workdir, LIVE)
    run_id = _submit(engine, workdir)
    try:
        _eventually(lambda: _runs(workdir, "fetch.us") and _runs(workdir, "fetch.br"), "both fetches running")
        on = ["--engine", engine.name, "pipeline.yaml"]
        for args in (["run", *on, "--only", "region=us"], ["run", *on], ["submit", *on]):
            _refused(engine.cli(args, workdir), run_id, "fetch.us")
        for args in (["resubmit", run_id], ["run", "--resume", run_id]):
            _refused(engine.cli(args, workdir), run_id)
        assert _run_ids(workdir) == [run_id]
    finally:
        _go(engine, workdir, "us", "br")
    status = _ended(engine, workdir, run_id)
    assert status["state"] == "succeeded", _shown(status)
    assert {name: _runs(workdir, name) for name in LIVE_NODES} == dict.fromkeys(LIVE_NODES, 1)


def test_runs_of_disjoint_nodes_never_block_each_other(engine: Engine) -> None:
    workdir = engine.new_workdir("disjoint")
    _write(engine, workdir, LIVE)
    us = _submit(engine, workdir, "--only", "region=us")
    try:
        _eventually(lambda: _runs(workdir, "fetch.us"), "fetch.us running")
        _go(engine, workdir, "br")
        code, br = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml", "--only", "region=br")
        assert code == 0 and br["state"] == "succeeded", _shown(br)
        assert _states(_status(engine, workdir, us))["fetch.us"] == "running"
    finally:
        _go(engine, workdir, "us")
    status = _ended(engine, workdir, us)
    assert status["state"] == "succeeded", _shown(status)
    assert {name: _runs(workdir, name) for name in LIVE_NODES} == dict.fromkeys(LIVE_NODES, 1)


def test_a_rerun_after_kill_9_of_dagflow_at_a_random_moment_never_runs_a_live_node_twice(engine: Engine) -> None:
    """kill -9 of `dagflow run` while both fetches run, at a random moment; a partial re-run is refused; a plain
    re-run continues the run where nothing drives it any more (local: it adopts the keeper's nodes; a job executor:
    dagflow's scheduler adopts its jobs by their keys) and is
    refused where the engine still drives it (DAGMan, Slurm, Grid Engine); each node runs once."""
    import random

    seed = time.time_ns()
    workdir = engine.new_workdir("killed")
    _write(engine, workdir, LIVE)
    first = engine.spawn(["run", "--engine", engine.name, "pipeline.yaml"], workdir)
    rerun: subprocess.Popen[str] | None = None
    try:
        _eventually(lambda: _runs(workdir, "fetch.us") and _runs(workdir, "fetch.br"), "both fetches running")
        time.sleep(random.Random(seed).uniform(0.0, 1.0))  # a random moment while both wait
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
        (run_id,) = _run_ids(workdir)
        partial = engine.cli(["run", "--engine", engine.name, "pipeline.yaml", "--only", "region=us"], workdir)
        _refused(partial, run_id, "fetch.us")
        before = _runners(workdir, run_id)
        rerun = engine.spawn(["run", "--engine", engine.name, "pipeline.yaml"], workdir)
        _eventually(lambda: rerun.poll() is not None or _runners(workdir, run_id) > before, "the re-run to decide")
        assert rerun.poll() in (None, 2), f"seed {seed}: re-run exited {rerun.returncode}"
    finally:
        _go(engine, workdir, "us", "br")
    assert rerun is not None
    if rerun.wait(timeout=WAIT_S) == 2:  # refused: the engine still drives the first run to its end
        assert engine.name not in ("local", plugin.NAME, plugin.HTJOBS, plugin.PROCJOBS), (
            f"seed {seed}: a cut-short run was not continued"
        )
    status = _ended(engine, workdir, run_id)
    assert status["state"] == "succeeded", f"seed {seed}: {_shown(status)}"
    assert _run_ids(workdir) == [run_id], f"seed {seed}"
    assert {name: _runs(workdir, name) for name in LIVE_NODES} == dict.fromkeys(LIVE_NODES, 1), f"seed {seed}"


# --- status only reads -----------------------------------------------------------------------------------------


def _read_only(engine: Engine, args: list[str], workdir: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    """`dagflow ARGS` as cli runs it, with the run directory mounted read-only in a mount namespace of its own:
    read-only even for root, who ignores file modes."""
    mount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh", str(run_dir), *engine.argv(args)]
    return subprocess.run(argv, cwd=workdir, capture_output=True, text=True, check=False, timeout=CLI_TIMEOUT_S)


def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = tmp_path / "mount-probe"
    probe.mkdir()
    argv = ["unshare", "-m", "--propagation", "private", "sh", "-c",
            f"mount --bind {probe} {probe} && mount -o remount,bind,ro {probe}"]  # fmt: skip
    try:
        return subprocess.run(argv, capture_output=True, check=False, timeout=60).returncode == 0
    except OSError:
        return False


def test_status_of_an_ingested_run_only_reads_and_is_the_same_from_a_read_only_run_directory(
    engine: Engine, tmp_path: Path
) -> None:
    """After the run's ingest (`dagflow run` waits on it), `dagflow status` and `status --json` write nothing
    into the run directory, and give the same from it made read-only (`chmod -R a-w`, and a read-only mount:
    root ignores modes): status reads only."""
    if os.geteuid() != 0 or not _can_mount_read_only(tmp_path):
        pytest.skip("needs root and a mount namespace to make a run directory read-only for root too")
    workdir = engine.new_workdir("read-only")
    _write(engine, workdir, BRANCHES)
    code, result = _run(engine, workdir, "--engine", engine.name, "pipeline.yaml")
    assert code == 1 and result["state"] == "failed", _shown(result)
    run_id, run_dir = result["run_id"], Path(result["run_dir"])
    files = entries(run_dir)
    text = engine.cli(["status", run_id], workdir)
    shown = _status(engine, workdir, run_id)
    assert shown == result, text.stderr
    assert entries(run_dir) == files, "status of an ingested run wrote into its run directory"
    with read_only(run_dir):
        readers = (
            engine.cli,  # its user: the run directory is not writable to it (unless root)
            lambda args, cwd: _local_cli(args, cwd, engine.root_env),  # root, who could write: it must not
            lambda args, cwd: _read_only(engine, args, cwd, run_dir),  # not writable even to root
        )
        for read in readers:
            again, plain = read(["status", run_id, "--json"], workdir), read(["status", run_id], workdir)
            assert (again.returncode, _json(again)) == (text.returncode, shown), again.stderr
            assert (plain.returncode, plain.stdout) == (text.returncode, text.stdout), plain.stderr
            assert "not recorded" not in again.stderr + plain.stderr
        assert entries(run_dir) == files, "status wrote into a read-only run directory"
