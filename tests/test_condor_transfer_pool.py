"""The transfer data mode on the real one-machine HTCondor pool (tests/condor_pool.py): a job runs in the
pool's execute directory, sees only what was transferred to it, a missing declared output fails its node
with a message naming the file, and the example pipeline gives the same metrics as a local run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from condor_pool import Pool, state_dir

pytestmark = pytest.mark.condor_pool

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "region-retrain"
RUN_TIMEOUT = 1200  # a whole DAG on a loaded 2-core machine: only stops a hang

PROBE = """\
import json, os, sys
declared = open("inputs/declared.txt").read().strip()
json.dump({"cwd": os.getcwd(), "declared": declared, "secret_visible": os.path.exists("secret.txt")},
          open("where.json", "w"))
"""

PIPELINE = """\
name: sandbox
steps:
  where:
    command: python probe.py
    inputs: [inputs/declared.txt]
    outputs: [where.json]
  peek:
    command: [python, -c, "open('secret.txt').read()"]
  lazy:
    command: [python, -c, "open('written.txt', 'w').write('yes')"]
    outputs: [written.txt, never/written.txt]
"""


def test_a_transfer_job_runs_in_its_scratch_directory_and_sees_only_what_was_sent(condor_pool: Pool) -> None:
    pool = condor_pool
    work = pool.workdir("transfer-sandbox")
    (work / "inputs").mkdir()
    (work / "inputs" / "declared.txt").write_text("sent by transfer\n")
    (work / "secret.txt").write_text("not declared\n")
    (work / "probe.py").write_text(PROBE)
    (work / "pipeline.yaml").write_text(PIPELINE)
    pool.give(work)

    done = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "transfer"], cwd=work,
                        check=False, timeout=RUN_TIMEOUT)
    assert done.returncode == 1, done.stdout + done.stderr  # peek and lazy fail, where succeeds

    where = json.loads((work / "where.json").read_text())  # came back through the wrapper's outbox
    execute = str(state_dir() / "execute") + "/"
    assert where["cwd"].startswith(execute), where
    assert not where["cwd"].startswith(str(work)), where
    assert where["declared"] == "sent by transfer"
    assert where["secret_visible"] is False

    status = json.loads(pool.dagflow(["status", "--json"], cwd=work, check=False).stdout)
    nodes = {node["node"]: node for node in status["nodes"]}
    assert (nodes["where"]["state"], nodes["peek"]["state"], nodes["lazy"]["state"]) == (
        "succeeded", "failed", "failed"
    )
    assert "No such file or directory: 'secret.txt'" in "\n".join(status["failed_stderr"]["peek"])
    text = pool.dagflow(["status"], cwd=work, check=False).stdout
    assert "declared output never/written.txt was not written" in text, text
    # A failed node sends nothing back, not even the outputs it did write.
    assert not (work / "written.txt").exists()


def run_here_and_in_transfer_mode(
    pool: Pool, example: Path, *made: str, timeout: float = RUN_TIMEOUT
) -> tuple[Path, Path]:
    """Two copies of an example (without what it `made`): one run locally, one on the pool in transfer mode."""
    copies = []
    for name in ("local", "transfer"):
        work = pool.workdir(f"{example.name}-{name}")
        shutil.copytree(example, work / example.name, ignore=shutil.ignore_patterns(*made, ".dagflow"))
        pool.give(work)
        copies.append(work / example.name)
    local, pooled = copies
    pool.dagflow(["run", "pipeline.yaml", "--jobs", "2"], cwd=local, timeout=timeout)
    done = pool.dagflow(["run", "pipeline.yaml", "--engine", "condor", "--data-mode", "transfer"], cwd=pooled,
                        check=False, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return local, pooled


def _metrics(directory: Path) -> dict[str, dict[str, float]]:
    found = {path.parent.name: json.loads(path.read_text()) for path in directory.glob("models/*/metrics.json")}
    assert sorted(found) == ["br", "de", "jp", "us"], found
    return found


def test_the_example_pipeline_runs_in_transfer_mode_with_the_metrics_of_a_local_run(condor_pool: Pool) -> None:
    local, pooled = run_here_and_in_transfer_mode(condor_pool, EXAMPLE, "data", "models", "reports")
    assert _metrics(pooled) == _metrics(local)
    report_local = json.loads((local / "reports" / "report.json").read_text())
    report_pooled = json.loads((pooled / "reports" / "report.json").read_text())
    assert report_pooled == report_local
    run_dir = next((pooled / ".dagflow" / "runs").glob("region-retrain-*"))
    assert json.loads((run_dir / "condor" / "run.json").read_text())["data_mode"] == "transfer"
    # The jobs really ran elsewhere: the execute-node steps got the wrapper, the transfer steps ran here.
    assert "universe                 = local" in (run_dir / "condor" / "stage.sub").read_text()
    assert "preserve_relative_paths  = true" in (run_dir / "condor" / "train.sub").read_text()
