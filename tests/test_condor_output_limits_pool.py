"""Issue #40 items 14 and 21 on the real HTCondor pool, in the transfer data mode: what a job cannot or
may not send back fails its node, and `dagflow run --engine condor` returns.

- A symbolic link to a directory inside a declared output directory (`models/best -> checkpoint-12`):
  HTCondor cannot send it back and would hold the job (HoldReasonCode 12, subcode 21) after part of the
  outputs had landed; the wrapper fails the node first, naming the link, and nothing comes back.
- An output over the pipeline's `condor: {max_transfer_output_mb}`: HTCondor holds the job
  (HoldReasonCode 33) and `periodic_remove` takes it out, so the node fails saying why.

The compiled files and the wrapper are tested without a pool in test_condor_transfer_mode.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from condor_pool import Pool

pytestmark = pytest.mark.condor_pool

RUN_TIMEOUT = 1200  # a whole DAG on a loaded 2-core machine: only stops a hang, the bug being tested

LINKED = """\
name: linked
steps:
  train:
    command: [sh, train.sh]
    outputs: [models]
  after:
    needs: [train]
    command: [cat, models/best/w.bin]
    inputs: [models]
"""

TRAIN_SH = "mkdir -p models/checkpoint-12 && echo w > models/checkpoint-12/w.bin && ln -s checkpoint-12 models/best\n"

BIG = """\
name: big
condor: {data_mode: transfer, max_transfer_output_mb: 1}
steps:
  train:
    command: [python, -c, "open('model.bin', 'wb').write(bytes(3 * 1024 * 1024))"]
    outputs: [model.bin]
  small:
    command: [python, -c, "open('small.bin', 'wb').write(bytes(1024))"]
    outputs: [small.bin]
"""


def _run(pool: Pool, name: str, pipeline: str) -> tuple[Path, subprocess.CompletedProcess[str], dict[str, dict]]:
    work = pool.workdir(name)
    (work / "pipeline.yaml").write_text(pipeline)
    (work / "train.sh").write_text(TRAIN_SH)
    pool.give(work)
    done = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "transfer"], cwd=work,
                        check=False, timeout=RUN_TIMEOUT)
    status = json.loads(pool.dagflow(["status", "--json"], cwd=work, check=False).stdout)
    return work, done, {node["node"]: node for node in status["nodes"]}


def test_a_link_to_a_directory_in_an_output_fails_the_node_naming_it(condor_pool: Pool) -> None:
    work, done, nodes = _run(condor_pool, "output-link", LINKED)
    assert done.returncode == 1, done.stdout + done.stderr  # returned, and failed
    assert nodes["train"]["state"] == "failed", nodes
    text = condor_pool.dagflow(["status"], cwd=work, check=False).stdout
    assert "declared output models holds models/best, a symbolic link to a directory (checkpoint-12)" in text, text
    assert not (work / "models").exists(), "a failed node sends nothing back: no half-landed outputs"


def test_an_output_over_the_limit_fails_the_node_instead_of_filling_the_disk(condor_pool: Pool) -> None:
    work, done, nodes = _run(condor_pool, "output-limit", BIG)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (nodes["train"]["state"], nodes["small"]["state"]) == ("failed", "succeeded"), nodes
    submit = next(work.glob(".dagflow/runs/*/condor/train.sub")).read_text()
    assert "max_transfer_output_mb   = 1" in submit
    model = work / "model.bin"
    assert not model.exists() or model.stat().st_size < 3 * 1024 * 1024, "the 3 MiB output did not come back whole"
    text = condor_pool.dagflow(["status"], cwd=work, check=False).stdout
    assert "exceeded" in text, text  # HTCondor's hold reason: "max total download bytes exceeded (max=1 MB ...)"
    assert (work / "small.bin").stat().st_size == 1024
