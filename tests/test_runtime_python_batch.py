"""`runtime: {python: ...}` on the local and batch engines: a step's `python` runs the interpreter it names, on the
real Slurm and Grid Engine clusters (the same rule the condor engine applies, plan/model.py Runtime.argv)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import load_spec

WAIT_S = 180
PIPELINE = """\
name: rtpython
runtime: {{python: {python}}}
steps:
  which:
    command: python -c "import sys; open('which.txt', 'w').write(sys.executable)"
    outputs: [which.txt]
  plain:
    command: python3 -c "import sys; open('plain.txt', 'w').write(sys.executable)"
    runtime: {{python: {other}}}
    outputs: [plain.txt]
"""


def plan_of(tmp_path: Path) -> tuple[Plan, Path, Path]:
    """Two interpreters that are links to this one under their own names: which one ran shows in sys.executable."""
    first, second = tmp_path / "env-a" / "bin" / "python", tmp_path / "env-b" / "bin" / "python"
    for link in (first, second):
        link.parent.mkdir(parents=True)
        link.symlink_to(sys.executable)
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.format(python=first, other=second), encoding="utf-8")
    return expand(load_spec(tmp_path / "pipeline.yaml")), first, second


def assert_ran_with(tmp_path: Path, first: Path, second: Path) -> None:
    assert (tmp_path / "which.txt").read_text() == str(first)
    assert (tmp_path / "plain.txt").read_text() == str(second)  # the step's runtime wins over the pipeline's


@pytest.mark.usefixtures("slurm_cluster")
def test_slurm_runs_a_steps_python_from_its_runtime(tmp_path: Path) -> None:
    from batch_run import submit_slurm, wait_slurm

    plan, first, second = plan_of(tmp_path)
    submitted = submit_slurm(plan, tmp_path / ".dagflow" / "runs")
    status = wait_slurm(submitted.layout, poll_s=0.2, timeout_s=WAIT_S)
    assert status.state == "succeeded", status.node_states()
    assert_ran_with(tmp_path, first, second)


@pytest.mark.usefixtures("sge_cluster")
def test_grid_engine_runs_a_steps_python_from_its_runtime(tmp_path: Path) -> None:
    from batch_run import submit_sge, wait_sge

    plan, first, second = plan_of(tmp_path)
    submitted = submit_sge(plan, tmp_path / ".dagflow" / "runs")
    status = wait_sge(submitted.layout, poll_s=0.2, timeout_s=WAIT_S)
    assert status.state == "succeeded", status.node_states()
    assert_ran_with(tmp_path, first, second)


def test_the_local_engine_runs_a_steps_python_from_its_runtime(tmp_path: Path) -> None:
    import subprocess

    plan_of(tmp_path)
    done = subprocess.run([sys.executable, "-m", "dagflow", "run", "pipeline.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert_ran_with(tmp_path, *plan_of_paths(tmp_path))


def plan_of_paths(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "env-a" / "bin" / "python", tmp_path / "env-b" / "bin" / "python"
