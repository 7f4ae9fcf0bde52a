"""`dagflow run --engine E` on a real Slurm cluster, Grid Engine cluster and HTCondor pool shows the run as a
local run does: one line per node event while it waits (stdout not a terminal), in the order they
happened, and the local run's summary at the end, promotions included."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

PIPELINE = """\
name: live
matrix:
  region: [us, de]
steps:
  train:
    kind: train
    command: [python, train.py, "{region}"]
    outputs:
      - out/{region}/model.txt
    publish: published/{run.id}/{region}/
  evaluate:
    kind: evaluate
    needs: [train]
    command: [python, evaluate.py, "{region}"]
    metrics: out/{region}/metrics.json
    promote_if: {metric: val_loss, better: lower, than: "promoted/{region}/latest"}
  gather:
    needs: [evaluate]
    over: [region]
    command: [python, -c, "print('gathered')"]
"""
TRAIN = """\
import os, sys
region = sys.argv[1]
if region == "de":
    sys.exit("no data for de")
os.makedirs("out/" + region, exist_ok=True)
open("out/" + region + "/model.txt", "w").write("model\\n")
"""
EVALUATE = """\
import json, sys
region = sys.argv[1]
json.dump({"val_loss": 0.5}, open("out/" + region + "/metrics.json", "w"))
"""
RAN = {"train.us": "succeeded", "train.publish.us": "succeeded", "evaluate.us": "succeeded",
       "evaluate.promote.us": "succeeded", "train.de": "failed"}  # fmt: skip
BLOCKED = {"train.publish.de", "evaluate.de", "evaluate.promote.de", "gather"}
EDGES = [("train.us", "train.publish.us"), ("train.us", "evaluate.us"), ("evaluate.us", "evaluate.promote.us"),
         ("train.publish.us", "evaluate.promote.us")]  # fmt: skip
TIMEOUT_S = 900  # a batch run on a loaded machine; only here to stop a hang
EVENT = re.compile(r"^\d\d:\d\d:\d\d \[(\d+)/9\] (started|succeeded|failed|retrying|held) (\S+)")
BLOCKED_LINE = re.compile(r"^\d\d:\d\d:\d\d \[(\d+)/9\] (\d+) nodes? will not run: (\S+) failed$")


def write_project(workdir: Path) -> None:
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    (workdir / "train.py").write_text(TRAIN)
    (workdir / "evaluate.py").write_text(EVALUATE)


def check_shown_like_a_local_run(done: subprocess.CompletedProcess[str], where: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert re.match(rf"^\d\d:\d\d:\d\d starting run live-\S+: 9 nodes on {where}", lines[0]), done.stdout
    events = [(m.group(2), m.group(3), int(m.group(1))) for line in lines if (m := EVENT.match(line))]
    # one start and one end per node that ran, with its outcome, and nothing else
    assert sorted((kind, name) for kind, name, _ in events if kind == "started") == sorted(
        ("started", name) for name in RAN
    ), done.stdout
    assert sorted((kind, name) for kind, name, _ in events if kind != "started") == sorted(
        (outcome, name) for name, outcome in RAN.items()
    ), done.stdout
    position = {(kind, name): index for index, (kind, name, _) in enumerate(events)}
    for name, outcome in RAN.items():
        assert position[("started", name)] < position[(outcome, name)], done.stdout
    for parent, child in EDGES:  # a node starts after the nodes it needs have succeeded
        assert position[("succeeded", parent)] < position[("started", child)], done.stdout
    counters = [count for _, _, count in events]
    assert counters == sorted(counters), done.stdout
    blocked = [(int(m.group(2)), m.group(3)) for line in lines if (m := BLOCKED_LINE.match(line))]
    assert sum(count for count, _ in blocked) == len(BLOCKED) and {by for _, by in blocked} == {"train.de"}, done.stdout

    summary = lines[lines.index(next(line for line in lines if line.startswith("run live-"))):]
    assert re.match(r"^run live-\S+ failed in \d+\.\ds: 4 succeeded, 1 failed, 4 upstream-failed$", summary[0]), summary
    assert any(re.match(r"^  failed train\.de: .*; see \S+/logs/train\.de\.err$", line) for line in summary), summary
    assert "  4 nodes did not run: a node upstream failed" in summary
    promotions = summary[summary.index("promotions:") + 1:]
    assert promotions[0] == "  us  promoted: val_loss 0.5; there was no current model", summary
    assert promotions[1] == "  de  failed: a node it needs failed", summary
    assert re.match(r"^resume with: dagflow run --resume live-\S+$", summary[-1]), summary


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["slurm", "sge"])
def test_a_batch_run_shows_each_node_and_the_summary(
    tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    request.getfixturevalue({"slurm": "slurm_cluster", "sge": "sge_cluster"}[engine])
    write_project(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", "--engine", engine, "pipeline.yaml"], cwd=tmp_path, env=cli_env(),
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    check_shown_like_a_local_run(done, {"slurm": "Slurm", "sge": "Grid Engine"}[engine])


@pytest.mark.slow
@pytest.mark.condor_pool
def test_a_condor_run_shows_each_node_and_the_summary(condor_pool) -> None:  # type: ignore[no-untyped-def]
    workdir = condor_pool.workdir("live-view")
    write_project(workdir)
    condor_pool.give(workdir)
    run = ["run", "--engine", "condor", "pipeline.yaml", "--data-mode", "shared"]
    done = condor_pool.dagflow(run, cwd=workdir, check=False, timeout=TIMEOUT_S)
    check_shown_like_a_local_run(done, r"HTCondor \(DAGMan job \d+\.0\)")
