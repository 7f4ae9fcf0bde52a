"""Issue #26 item 1 on the real HTCondor pool: a transfer-mode job that writes files it did not declare
(the pipeline's own `pipeline.yaml`, another region's data, strays in its scratch directory, and the same
again from a detached child that outlives the command) changes nothing on the access point but its
declared outputs and metrics file.

The pool is one machine, so a job could also write the pipeline's directory by its absolute path, as the
pool user; on a real pool the execute node is another machine and cannot, so that path is not tried here:
what is tested is what HTCondor's file transfer brings back."""

from __future__ import annotations

from pathlib import Path

import pytest
from condor_pool import Pool

pytestmark = pytest.mark.condor_pool

RUN_TIMEOUT = 1200  # a whole DAG on a loaded 2-core machine: only stops a hang

# Writes its declared outputs (argv), and forged files wherever the old outbox or the pipeline's layout
# would carry them back; a detached child (its own session, so it escapes the command's process group)
# keeps forging after the command has exited. HTCondor ends the child with the job.
HOSTILE = """\
import os, subprocess, sys, time

FORGED = ["_dagflow_outputs/pipeline.yaml", "_dagflow_outputs/data/br/data.csv", "pipeline.yaml",
          "data/br/data.csv", "stray.txt", "models/us/extra.txt", "_dagflow_outputs/models/us/extra.txt"]

def forge():
    for path in FORGED:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as handle:
            handle.write("forged by the job\\n")

if sys.argv[1:] == ["child"]:
    for _ in range(200):
        try:
            forge()
        except OSError:
            pass
        time.sleep(0.05)
    sys.exit(0)
forge()
for path in sys.argv[1:]:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as handle:
        handle.write('{"val_loss": 0.5}\\n' if path.endswith(".json") else "declared\\n")
subprocess.Popen([sys.executable, sys.argv[0], "child"], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
time.sleep(0.5)
"""

PIPELINE = """\
name: hostile
steps:
  train:
    command: python hostile.py models/us/model.pkl models/us/metrics.json
    outputs: [models/us/model.pkl]
    metrics: models/us/metrics.json
  quiet:
    command: python hostile.py
"""


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under root but dagflow's run records, by relative path."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in root.rglob("*")
        if path.is_file() and path.relative_to(root).parts[0] != ".dagflow"
    }


def test_a_transfer_job_sends_back_only_its_declared_outputs(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("transfer-outbox")
    (work / "pipeline.yaml").write_text(PIPELINE)
    (work / "hostile.py").write_text(HOSTILE)
    (work / "data" / "br").mkdir(parents=True)
    (work / "data" / "br" / "data.csv").write_text("region,rating\nbr,4\n")
    pool.give(work)
    before = _tree(work)

    done = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "transfer"], cwd=work,
                        check=False, timeout=RUN_TIMEOUT)

    after = _tree(work)
    assert after["pipeline.yaml"] == before["pipeline.yaml"]
    assert after["data/br/data.csv"] == before["data/br/data.csv"]
    assert sorted(set(after) - set(before)) == ["models/us/metrics.json", "models/us/model.pkl"]
    assert {path: after[path] for path in before} == before
    assert after["models/us/model.pkl"] == b"declared\n"
    assert done.returncode == 0, done.stdout + done.stderr
