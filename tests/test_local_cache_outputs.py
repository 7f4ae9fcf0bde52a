"""A node is cached only while what it produced is still there and unchanged: its declared outputs and a
transfer step's destination, in this pipeline's directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import make_plan, node, step

from dagflow.engines.local import RunOptions
from dagflow.plan.expand import expand
from dagflow.spec import load_spec

PIPELINE = """\
name: staged
matrix:
  region: [us, br]
steps:
  stage:
    kind: transfer
    from: source/{region}/
    to: data/{region}/
  train:
    needs: [stage]
    command: sh -c 'cat data/{region}/data.csv > model.{region}; echo {region} >> trained.log'
    inputs:
      - data/{region}/data.csv
    outputs:
      - model.{region}
"""


def project(root: Path) -> Path:
    for region in ("us", "br"):
        (root / "source" / region).mkdir(parents=True)
        (root / "source" / region / "data.csv").write_text(f"{region},1\n")
    (root / "pipeline.yaml").write_text(PIPELINE)
    return root / "pipeline.yaml"


def run(pipeline: Path, run_id: str, runs_dir: Path):
    plan = expand(load_spec(pipeline), run_id=run_id)
    return run_local(plan, RunOptions(runs_dir=runs_dir, jobs=2, kill_grace_s=0.5))


@pytest.mark.slow
def test_a_transfer_whose_destination_was_deleted_runs_again(tmp_path: Path) -> None:
    pipeline = project(tmp_path / "proj")
    runs = tmp_path / ".dagflow" / "runs"
    assert run(pipeline, "r1", runs).ok
    assert set(run(pipeline, "r2", runs).states.values()) == {"cached"}

    shutil.rmtree(tmp_path / "proj" / "data" / "us")
    third = run(pipeline, "r3", runs)
    assert third.ok, third.failures
    assert third.states["stage.us"] == "succeeded", "its destination is gone: not cached"
    assert third.states["stage.br"] == "cached"
    assert (tmp_path / "proj" / "data" / "us" / "data.csv").read_text() == "us,1\n"


@pytest.mark.slow
def test_a_pipeline_copied_to_another_directory_is_not_cached_from_the_original(tmp_path: Path) -> None:
    runs = tmp_path / ".dagflow" / "runs"  # one cache for both directories, as from one working directory
    assert run(project(tmp_path / "one"), "r1", runs).ok
    shutil.copytree(tmp_path / "one", tmp_path / "two", ignore=shutil.ignore_patterns("data", "model.*", "*.log"))
    copied = run(tmp_path / "two" / "pipeline.yaml", "r2", runs)
    assert copied.ok, copied.failures
    assert copied.states["stage.us"] == copied.states["stage.br"] == "succeeded"
    assert (tmp_path / "two" / "data" / "br" / "data.csv").is_file()
    assert sorted((tmp_path / "two" / "trained.log").read_text().split()) == ["br", "us"]


def test_a_deleted_or_rewritten_declared_output_reruns_its_node(tmp_path: Path) -> None:
    s = step("s")

    def plan(run_id: str):
        made = node("make", "s", "echo run >> make.log; echo out > out.txt", outputs=["out.txt"])
        return make_plan(tmp_path, [s], [made], run_id=run_id)

    options = RunOptions(runs_dir=tmp_path / ".dagflow" / "runs", jobs=2)
    assert run_local(plan("r1"), options).states == {"make": "succeeded"}
    assert run_local(plan("r2"), options).states == {"make": "cached"}
    (tmp_path / "out.txt").unlink()
    assert run_local(plan("r3"), options).states == {"make": "succeeded"}
    (tmp_path / "out.txt").write_text("edited by hand, longer than before\n")
    assert run_local(plan("r4"), options).states == {"make": "succeeded"}
    assert run_local(plan("r5"), options).states == {"make": "cached"}
    assert (tmp_path / "make.log").read_text().split() == ["run", "run", "run"]
