"""The engine registry: names, lazy loading, engine options on the command line, the engine a run records
and every command that continues the run using it, and a plugin engine driven end to end by the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from condor_runs import prepare_condor
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.base import EngineBase, EngineOption
from dagflow.engines.registry import (
    EngineChoiceError,
    engine_class,
    engine_names,
    engine_of_run,
    engine_options,
    load_engine,
    read_run_status,
    register_engine,
    run_session,
    unregister_engine,
)
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.layout import RunLayout
from dagflow.run.reports import Launched
from dagflow.run.session import Work
from dagflow.run.status import RunStatus, read_status
from dagflow.spec import parse_spec

PIPELINE = """\
name: p
steps:
  a:
    command: echo hi
    resources: {cpus: 1, memory: 2GB}
"""


class FakeEngine(EngineBase):
    """A test-only engine: it records what the CLI asked of it in the run directory and runs nothing."""

    name: ClassVar[str] = "fake"
    summary: ClassVar[str] = "records calls; runs nothing"
    options: ClassVar[tuple[EngineOption, ...]] = ()
    honours: ClassVar[frozenset[str]] = frozenset({"cpus"})

    def _note(self, run_dir: Path, what: str) -> None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        with open(Path(run_dir) / "calls", "a") as handle:
            handle.write(what + "\n")

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        self._note(run_dir, "prepare")

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        self._note(layout.run_dir, "resume" if work.resume else "submit")
        handle = "fake-2" if work.resume else "fake-1"
        return Launched(handle, {"handle": handle})

    def wait(self, run_dir: Path) -> None:
        self._note(run_dir, "wait")

    def read_status(self, layout: RunLayout) -> RunStatus:
        status = read_status(layout)
        status.notes.append("read by the fake engine")
        return status

    def cancel(self, run_dir: Path) -> None:
        self._note(run_dir, "cancel")


@pytest.fixture
def fake_engine() -> Iterator[str]:
    register_engine("fake", f"{__name__}:FakeEngine")
    yield "fake"
    unregister_engine("fake")


def calls(run_dir: Path) -> list[str]:
    return (run_dir / "calls").read_text().split()


def invoke(*args: str):  # -> click.testing.Result
    return CliRunner().invoke(app, list(args))


def test_names_and_unknown_engines() -> None:
    assert engine_names()[:4] == ["local", "condor", "sge", "slurm"]  # the default, then the entry points' order
    with pytest.raises(EngineChoiceError, match="unknown engine 'nosuch'; choose one of local, condor, sge, slurm"):
        load_engine("nosuch")
    result = invoke("submit", "p.yaml", "--engine", "nosuch")
    assert result.exit_code == 2 and "unknown engine 'nosuch'" in result.output


def test_engines_are_imported_only_when_chosen() -> None:
    code = textwrap.dedent("""
        import sys
        from dagflow.engines.registry import engine_names, load_engine
        engine_names()  # reads the declarations (each engine's settings.py), not the engines
        heavy = ("dagflow.engines.condor.engine", "dagflow.engines.slurm.engine", "htcondor2")
        assert not any(name.startswith(heavy) for name in sys.modules)
        load_engine("slurm")
        assert "dagflow.engines.slurm.engine" in sys.modules and "dagflow.engines.condor.engine" not in sys.modules
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_missing_engine_module_is_an_error_for_that_choice_only(fake_engine: str) -> None:
    register_engine("broken", "dagflow.engines.no_such_engine:Engine")
    try:
        with pytest.raises(EngineChoiceError, match="the broken engine is not available here"):
            load_engine("broken")
        assert load_engine("local").name == "local"
    finally:
        unregister_engine("broken")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["submit", "p.yaml", "--engine", "slurm", "--max-gpu-jobs", "4"], "--max-gpu-jobs: only for --engine condor"),
        (["submit", "p.yaml", "--engine", "local", "--pool", "cm"], "--pool: only for --engine condor, not local"),
        (["run", "p.yaml", "--engine", "condor", "--jobs", "2"], "--jobs: only for --engine local, not condor"),
        (["run", "p.yaml", "--engine", "slurm", "--no-cache"], "--no-cache: only for --engine local, not slurm"),
    ],
)
def test_an_option_of_another_engine_is_refused(tmp_path: Path, args: list[str], message: str) -> None:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    args = [str(tmp_path / arg) if arg == "p.yaml" else arg for arg in args]
    result = invoke(*args, "--runs-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "runs").exists()  # refused before anything was made


def test_a_plugin_engine_runs_through_submit_status_cancel_and_resume(tmp_path: Path, fake_engine: str) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(PIPELINE)
    runs = str(tmp_path / "runs")
    submitted = invoke("submit", str(pipeline), "--engine", "fake", "--runs-dir", runs, "--run-id", "r1", "--json")
    assert submitted.exit_code == 0, submitted.output
    assert json.loads(submitted.stdout) == {"run_id": "r1", "engine": "fake", "handle": "fake-1"}
    assert "the fake engine ignores memory" in submitted.stderr  # fake honours cpus only
    run_dir = tmp_path / "runs" / "r1"
    assert (run_dir / "engine").read_text() == "fake\n"

    status = invoke("status", "r1", "--runs-dir", runs, "--json")
    assert status.exit_code == 0, status.output
    assert json.loads(status.stdout)["engine"] == "fake"

    # every command that continues the run uses the recorded engine, without --engine
    # what it started is data (its facts in --json); the words are the session's, the same for every engine
    resumed = invoke("submit", "--resume", "r1", "--runs-dir", runs)
    assert resumed.stdout == "submitted run r1 to fake; follow it with `dagflow status r1`\n"
    assert invoke("resubmit", "r1", "--runs-dir", runs).exit_code == 0
    assert invoke("run", "--resume", "r1", "--runs-dir", runs, "--json").exit_code == 1  # not-started: exit 1
    assert invoke("cancel", "r1", "--runs-dir", runs).exit_code == 0
    assert calls(run_dir) == ["prepare", "submit", "resume", "resume", "resume", "wait", "cancel", "wait"]

    other = invoke("run", "--resume", "r1", "--engine", "local", "--runs-dir", runs)
    assert other.exit_code == 2 and "was started with --engine fake" in other.output


def test_the_engine_is_recorded_once_and_old_runs_fall_back_on_markers(tmp_path: Path) -> None:
    plan = expand(parse_spec(PIPELINE, "p.yaml", base=tmp_path), run_id="c1")
    layout = prepare_condor(plan, tmp_path)
    assert layout.layout.recorded_engine() == "condor" and engine_of_run(layout.layout) == "condor"
    layout.layout.engine_path.unlink()  # a run made before runs recorded their engine
    assert engine_of_run(layout.layout) == "condor"
    assert read_run_status(layout.layout).engine == "condor"

    local_plan = expand(parse_spec(PIPELINE, "p.yaml", base=tmp_path), run_id="l1")
    run_session(load_engine("local", tmp_path)).create(local_plan, tmp_path)
    assert RunLayout(tmp_path, "l1").recorded_engine() == "local"
    RunLayout(tmp_path, "l1").create(plan, engine="slurm")  # written once: never replaced
    assert RunLayout(tmp_path, "l1").recorded_engine() == "local"


def test_every_builtin_engine_declares_the_same_options_apart_and_on_its_class() -> None:
    # The CLI reads the light declarations (registry `options`); the engine class must agree with them.
    for name in ("local", "condor", "slurm", "sge"):
        assert engine_options(name) == tuple(engine_class(name).options), name


def test_the_cli_imports_no_cluster_engine() -> None:
    # Building every command's flags used to import every engine (about 0.1 s per command).
    probe = (
        "import sys, dagflow.cli; "
        "print(sorted(m for m in sys.modules if m.split('.')[:3] in (['dagflow', 'engines', e] for e in "
        "('condor', 'slurm', 'sge')) and m.count('.') == 3 and not m.endswith('.settings')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_the_builtin_engines_are_entry_points_like_any_plugin() -> None:
    from importlib.metadata import entry_points

    from dagflow.engines.base import EngineDeclaration

    points = {point.name: point for point in entry_points(group="dagflow.engines")}
    assert {"local", "condor", "slurm", "sge"} <= set(points)
    for name in ("local", "condor", "slurm", "sge"):
        declared = points[name].load()
        assert isinstance(declared, EngineDeclaration)
        assert engine_class(name).name == name
    assert engine_names()[0] == "local"
