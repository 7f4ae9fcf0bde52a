"""The local engine run in-process on hand-built plans: ordering, failures, retries, timeouts, GPUs,
caching, environment."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest
from local_run import create_local, resume_local, run_local, submit_local
from run_dir_support import states
from test_local_support import make_plan, node, step

from dagflow.engines.local import LocalEngine, RunOptions
from dagflow.engines.local.resources import ResourceError
from dagflow.plan import Node, Resources
from dagflow.run.journal import read_journal
from dagflow.run.layout import RunLayout
from dagflow.run.session import Work


def options(tmp_path: Path, **fields: object) -> RunOptions:
    values: dict[str, object] = {"runs_dir": tmp_path / ".dagflow" / "runs", "jobs": 2, "kill_grace_s": 0.5}
    values.update(fields)
    return RunOptions(**values)  # type: ignore[arg-type]


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_parents_finish_before_children_and_independent_nodes_overlap(tmp_path: Path) -> None:
    s = step("s")
    mark = "date +%s.%N > {0}.start; sleep 0.3; date +%s.%N > {0}.end"
    plan = make_plan(
        tmp_path,
        [s],
        [
            node("a", "s", mark.format("a")),
            node("b", "s", mark.format("b")),
            node("c", "s", "test -f a.end && test -f b.end && touch c.ok", parents=["a", "b"]),
        ],
    )
    result = run_local(plan, options(tmp_path))
    assert result.ok and result.exit_code == 0
    assert (tmp_path / "c.ok").exists()
    a_start, a_end = float(lines(tmp_path / "a.start")[0]), float(lines(tmp_path / "a.end")[0])
    b_start, b_end = float(lines(tmp_path / "b.start")[0]), float(lines(tmp_path / "b.end")[0])
    assert a_start < b_end and b_start < a_end, "two slots run a and b at the same time"
    layout = RunLayout(tmp_path / ".dagflow" / "runs", "r1")
    assert layout.plan_path.is_file()
    assert not layout.stdout_path("c").exists(), "a node that prints nothing leaves no log file"


def test_a_failed_branch_stops_its_descendants_while_others_run_on(tmp_path: Path) -> None:
    s = step("s")
    plan = make_plan(
        tmp_path,
        [s],
        [
            node("bad", "s", "echo broken >&2; exit 3"),
            node("after_bad", "s", "touch after_bad.ran", parents=["bad"]),
            node("last", "s", "touch last.ran", parents=["after_bad"]),
            node("good", "s", "sleep 0.2; touch good.ran"),
            node("after_good", "s", "touch after_good.ran", parents=["good"]),
            Node(name="missing", step="s", argv=["no-such-command-dagflow"], env={}, coords={}),
        ],
    )
    result = run_local(plan, options(tmp_path))
    assert result.state == "failed" and result.exit_code == 1
    assert result.states == {
        "bad": "failed",
        "after_bad": "upstream_failed",
        "last": "upstream_failed",
        "good": "succeeded",
        "after_good": "succeeded",
        "missing": "failed",
    }
    assert (tmp_path / "after_good.ran").exists() and not (tmp_path / "after_bad.ran").exists()
    failures = {f.node: f for f in result.failures}
    assert set(failures) == {"bad", "missing"}
    assert "exit code 3" in failures["bad"].why
    assert "broken" in failures["bad"].log.read_text()
    assert "cannot start 'no-such-command-dagflow'" in failures["missing"].log.read_text()


def test_retries_until_success_and_unless_exit_codes_stop_retrying(tmp_path: Path) -> None:
    flaky = step("flaky", retries=3, retry_unless_exit=(4,))
    fatal = step("fatal", retries=3, retry_unless_exit=(4,))
    plan = make_plan(
        tmp_path,
        [flaky, fatal],
        [
            # fails twice with exit 1, then succeeds
            node("f", "flaky", 'echo x >> f.count; echo "try $(wc -l < f.count)" >&2; [ "$(wc -l < f.count)" -ge 3 ]'),
            node("g", "fatal", "echo x >> g.count; exit 4"),
        ],
    )
    result = run_local(plan, options(tmp_path))
    assert result.states == {"f": "succeeded", "g": "failed"}
    assert len(lines(tmp_path / "f.count")) == 3
    assert len(lines(tmp_path / "g.count")) == 1
    record = read_journal(RunLayout(tmp_path / ".dagflow" / "runs", "r1").journal_path).nodes["f"]
    assert record.attempts == 3
    err = RunLayout(tmp_path / ".dagflow" / "runs", "r1").stderr_path("f").read_text()
    assert err == "try 1\n\n=== dagflow: attempt 2 ===\ntry 2\n\n=== dagflow: attempt 3 ===\ntry 3\n"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    slow = step("slow", timeout_s=1, retries=1)
    plan = make_plan(
        tmp_path,
        [slow],
        [node("n", "slow", "sleep 30 & echo $! >> grandchild.pid; wait")],
    )
    started = time.monotonic()
    result = run_local(plan, options(tmp_path))
    assert time.monotonic() - started < 15
    assert result.states == {"n": "failed"}
    assert "timed out" in result.failures[0].why
    assert result.failures[0].attempts == 2  # a timeout is retried like any failure
    grandchildren = [int(pid) for pid in lines(tmp_path / "grandchild.pid")]
    assert len(grandchildren) == 2
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in grandchildren) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(pid) for pid in grandchildren)


def test_gpu_nodes_get_their_own_devices(tmp_path: Path) -> None:
    gpu = step("gpu", resources=Resources(memory_mb=16, gpus=1))
    pair = step("pair", resources=Resources(memory_mb=16, gpus=2))
    record = (
        'echo "$CUDA_VISIBLE_DEVICES $(date +%s.%N)" > $DAGFLOW_NODE.start; sleep 0.2; date +%s.%N > $DAGFLOW_NODE.end'
    )
    nodes = [node(f"g{i}", "gpu", record) for i in range(5)] + [node("p", "pair", record)]
    plan = make_plan(tmp_path, [gpu, pair], nodes)
    result = run_local(plan, options(tmp_path, jobs=4, gpus="0,1"))
    assert result.ok
    spans = []
    for n in nodes:
        devices, start = lines(tmp_path / f"{n.name}.start")
        spans.append((set(devices.split(",")), float(start), float(lines(tmp_path / f"{n.name}.end")[0])))
    assert spans[-1][0] == {"0", "1"}
    assert all(len(devices) == 1 and devices <= {"0", "1"} for devices, _, _ in spans[:-1])
    for i, (dev_i, start_i, end_i) in enumerate(spans):
        for dev_j, start_j, end_j in spans[i + 1 :]:
            if dev_i & dev_j:
                assert end_i <= start_j or end_j <= start_i, "two nodes shared a GPU at the same time"


def test_nodes_that_cannot_fit_are_reported_before_anything_starts(tmp_path: Path) -> None:
    big = step("big", resources=Resources(memory_mb=16, gpus=3))
    plan = make_plan(tmp_path, [big], [node("n", "big", "touch ran")])
    with pytest.raises(ResourceError, match="needs 3 GPUs"):
        run_local(plan, options(tmp_path, gpus="0,1"))
    huge = step("huge", resources=Resources(cpus=100_000, memory_mb=16))
    with pytest.raises(ResourceError, match="100000 cpus"):
        run_local(make_plan(tmp_path, [huge], [node("n", "huge", "touch ran")]), options(tmp_path))
    assert not (tmp_path / "ran").exists()
    assert not (tmp_path / ".dagflow" / "runs" / "r1").exists()


def test_ready_nodes_start_in_priority_order(tmp_path: Path) -> None:
    steps = [step("low", priority=0), step("high", priority=10), step("mid", priority=5)]
    nodes = [node(s.name, s.name, f"echo {s.name} >> order") for s in steps]
    result = run_local(make_plan(tmp_path, steps, nodes), options(tmp_path, jobs=1))
    assert result.ok
    assert lines(tmp_path / "order") == ["high", "mid", "low"]


def test_cache_skips_unchanged_nodes_and_reruns_on_changed_input(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.csv").write_text("1\n")
    s = step("s")

    def plan(run_id: str):
        return make_plan(
            tmp_path,
            [s, step("t")],
            [
                node("prep", "s", "echo prep >> runs.log; cat data/x.csv > prepared", inputs=["data"]),
                node("use", "t", "echo use >> runs.log", parents=["prep"]),
            ],
            run_id=run_id,
        )

    first = run_local(plan("r1"), options(tmp_path))
    assert first.states == {"prep": "succeeded", "use": "succeeded"}
    second = run_local(plan("r2"), options(tmp_path))
    assert second.states == {"prep": "cached", "use": "cached"}
    assert lines(tmp_path / "runs.log") == ["prep", "use"]

    (tmp_path / "data" / "x.csv").write_text("2\n")  # changed input: prep reruns, and so does use
    third = run_local(plan("r3"), options(tmp_path))
    assert third.states == {"prep": "succeeded", "use": "succeeded"}
    assert lines(tmp_path / "runs.log") == ["prep", "use", "prep", "use"]

    forced = run_local(plan("r4"), options(tmp_path, force=("t",)))
    assert forced.states == {"prep": "cached", "use": "succeeded"}


def test_nodes_get_the_run_environment_and_the_plan_workdir(tmp_path: Path) -> None:
    workdir = tmp_path / "work"
    workdir.mkdir()
    s = step("s")
    nodes = [
        node("env", "s", "echo $DAGFLOW_RUN_ID $DAGFLOW_NODE $MY_VAR $(pwd) > env.txt", env={"MY_VAR": "v"}),
        Node(name="self", step="s", argv=["dagflow", "--help"], env={}, coords={}),
    ]
    result = run_local(make_plan(workdir, [s], nodes), options(tmp_path))
    assert result.ok, result.failures
    run_id, name, var, cwd = lines(workdir / "env.txt")
    assert (run_id, name, var, Path(cwd).resolve()) == ("r1", "env", "v", workdir.resolve())
    layout = RunLayout(tmp_path / ".dagflow" / "runs", "r1")
    assert "run" in layout.stdout_path("self").read_text()  # `python -m dagflow --help` lists commands
    assert os.environ.get("DAGFLOW_NODE") is None and sys.executable


def test_resume_reruns_only_what_did_not_succeed(tmp_path: Path) -> None:
    s = step("s")
    plan = make_plan(
        tmp_path,
        [s],
        [
            node("ok", "s", "echo ok >> runs.log"),
            node("flaky", "s", "echo flaky >> runs.log; test -f fixed"),
            node("after", "s", "echo after >> runs.log", parents=["flaky"]),
        ],
    )
    first = run_local(plan, options(tmp_path, use_cache=False))
    assert first.states == {"ok": "succeeded", "flaky": "failed", "after": "upstream_failed"}
    (tmp_path / "fixed").touch()
    second = resume_local("r1", options(tmp_path, use_cache=False))
    assert second.ok and second.resumed_done == 1
    assert sorted(lines(tmp_path / "runs.log")) == ["after", "flaky", "flaky", "ok"]


def test_the_engine_contract_runs_a_detached_runner(tmp_path: Path) -> None:
    from dagflow.run.status import read_status

    s = step("s")
    plan = make_plan(tmp_path, [s], [node("a", "s", "echo a"), node("b", "s", "echo b", parents=["a"])])
    engine, run_dir = create_local(plan, options(tmp_path))
    assert states(engine, run_dir) == {"a": "pending", "b": "pending"}
    assert int(engine.launch(RunLayout.from_run_dir(run_dir), Work(plan, tuple(plan.nodes))).handle) > 0
    deadline = time.monotonic() + 30
    while read_status(RunLayout.from_run_dir(run_dir)).state not in ("succeeded", "failed"):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert states(engine, run_dir) == {"a": "succeeded", "b": "succeeded"}


def test_output_is_captured_whole_and_retries_append(tmp_path: Path) -> None:
    s = step("s", retries=1)
    big = "head -c 1000000 /dev/zero | tr '\\0' x; head -c 200000 /dev/zero | tr '\\0' y >&2"
    flaky = "echo try >> tries; echo out-$(wc -l < tries); echo err-$(wc -l < tries) >&2; test $(wc -l < tries) -ge 2"
    result = run_local(make_plan(tmp_path, [s], [node("big", "s", big), node("flaky", "s", flaky)]), options(tmp_path))
    assert result.ok
    layout = RunLayout(tmp_path / ".dagflow" / "runs", "r1")
    assert layout.stdout_path("big").read_text() == "x" * 1_000_000
    assert layout.stderr_path("big").read_text() == "y" * 200_000
    assert layout.stdout_path("flaky").read_text() == "out-1\n\n=== dagflow: attempt 2 ===\nout-2\n"
    assert layout.stderr_path("flaky").read_text() == "err-1\n\n=== dagflow: attempt 2 ===\nerr-2\n"


def submit_detached(tmp_path: Path, name: str, script: str) -> tuple[LocalEngine, Path, RunLayout]:
    """One node run by a detached runner through the Engine contract."""
    engine, run_dir, _ = submit_local(make_plan(tmp_path, [step("s")], [node(name, "s", script)]), options(tmp_path))
    return engine, run_dir, RunLayout.from_run_dir(run_dir)


def test_a_running_nodes_output_reaches_its_log_while_it_runs(tmp_path: Path) -> None:
    engine, run_dir, layout = submit_detached(tmp_path, "chatty", "echo started; echo warming >&2; sleep 30")
    deadline = time.monotonic() + 30
    try:
        while lines(layout.stdout_path("chatty")) != ["started"] or lines(layout.stderr_path("chatty")) != ["warming"]:
            assert time.monotonic() < deadline, "the output of a running node never reached its logs"
            time.sleep(0.05)
        assert states(engine, run_dir)["chatty"] == "running"
    finally:
        engine.cancel(run_dir)


def test_engine_cancel_sends_sigterm_and_the_run_ends_interrupted(tmp_path: Path) -> None:
    from dagflow.run.status import read_status

    engine, run_dir, layout = submit_detached(tmp_path, "sleepy", "sleep 30")
    deadline = time.monotonic() + 30
    while states(engine, run_dir)["sleepy"] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    engine.cancel(run_dir)
    while read_status(layout).state != "interrupted":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert states(engine, run_dir) == {"sleepy": "interrupted"}


def test_gpus_are_discovered_with_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dagflow.engines.local.resources import Gpu, detect_machine

    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    # nvidia-smi's index, name, memory.total, compute_cap, driver_version, memory.reserved: usable memory is
    # the total less the reserved (an H100 80GB: 81559 - 480)
    fake.write_text("#!/bin/sh\nprintf '0, Tesla V100, 16384, 7.0, 550.1, 0\\n1, H100, 82400, 9.0, 550.1, 480\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert detect_machine(None, need_gpus=True).gpus == (Gpu("0", 16384), Gpu("1", 81920))
    assert detect_machine(None, need_gpus=False).gpus == ()  # not asked when no node needs a GPU

    big = step("big", resources=Resources(memory_mb=16, gpus=1, gpu_memory_mb=40_000))
    record = "echo $CUDA_VISIBLE_DEVICES >> devices"
    result = run_local(
        make_plan(tmp_path, [big], [node("a", "big", record), node("b", "big", record)]), options(tmp_path)
    )
    assert result.ok
    assert lines(tmp_path / "devices") == ["1", "1"]  # only GPU 1 has 40 GB


def test_python_in_a_command_is_the_interpreter_running_dagflow(tmp_path: Path) -> None:
    """As if dagflow's venv were activated: `python` resolves to it even when PATH lacks it."""
    import subprocess

    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "name: which\nsteps:\n  probe:\n"
        "    command: [python, -c, \"import sys, pathlib; pathlib.Path('prefix.txt').write_text(sys.prefix)\"]\n"
    )
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", str(pipeline), "--runs-dir", str(tmp_path / "runs")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "prefix.txt").read_text() == sys.prefix


def test_a_detached_runner_runs_with_the_options_an_embedding_program_gave_the_engine(tmp_path: Path) -> None:
    """An embedding program sets the engine's run_options; the runner `launch` detaches takes them as flags."""
    plan = make_plan(tmp_path, [step("s")], [node("once", "s", "echo ran >> ran.log")], run_id="first")
    assert run_local(plan, options(tmp_path)).states == {"once": "succeeded"}
    again = make_plan(tmp_path, [step("s")], [node("once", "s", "echo ran >> ran.log")], run_id="second")
    engine, run_dir, _ = submit_local(again, options(tmp_path, use_cache=False))  # --no-cache: not served cached
    engine.wait(run_dir)
    assert states(engine, run_dir) == {"once": "succeeded"}
    assert lines(tmp_path / "ran.log") == ["ran", "ran"]
