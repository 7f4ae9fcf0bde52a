"""Self-checkpointing train steps on the real HTCondor pool: a train node that checkpoints each epoch
(8 epochs of 2.5 s, `exit 85` after each) is evicted mid-run, by `condor_vacate_job` and, separately, by
a quick drain of its machine (what `dagflow agent watch` does on a spot interruption notice), and then
finishes having repeated at most one epoch.

Epochs are counted twice: `ckpt/epochs.log`, part of the checkpoint, lists the epochs whose work survived
(it must read 1..8); the witness file lists every epoch that was *started*, evicted ones included (the
pool is one machine, so the job can append to a file of the test's: instrumentation, not the idiom).

The pool's only machine is drained in the drain test: the drain is cancelled as soon as the job has been
evicted, which stands in for the replacement machine a spot pool would get.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.checkpoint_support import epochs, write_train
from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

EPOCHS = 8
EPOCH_S = 2.5
DRAIN_REASON = "dagflow test: spot interruption notice"
# DRAIN_JOBS needs ADMINISTRATOR access, which this pool grants to its user authenticated by FS only
AUTHENTICATED = {"_CONDOR_SEC_CLIENT_AUTHENTICATION": "REQUIRED", "_CONDOR_SEC_CLIENT_AUTHENTICATION_METHODS": "FS"}


def _pipeline(pool: Pool, name: str) -> Path:
    workdir = pool.workdir(name)
    write_train(workdir)
    text = (
        f"name: {name}\n"
        "steps:\n"
        "  train:\n"
        "    kind: train\n"
        f"    command: python train.py {EPOCHS} {EPOCH_S}\n"
        f"    env: {{EPOCH_WITNESS: {workdir / 'started.log'}}}\n"
        "    outputs: [ckpt]\n"
        "    checkpoint: {files: [ckpt], exit_code: 85}\n"
    )
    (workdir / "pipeline.yaml").write_text(text, encoding="utf-8")
    pool.give(workdir)
    return workdir


def _submit(pool: Pool, workdir: Path, mode: str) -> str:
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", mode], cwd=workdir)
    return json.loads(done.stdout)["run_id"]


def _train_job(pool: Pool, run_id: str) -> tuple[str, int] | None:
    """(job id, JobStatus) of the run's train job, or None while it is not queued."""
    constraint = f'DagflowRunId == "{run_id}" && DagflowStep == "train"'
    done = pool.run(["condor_q", "-constraint", constraint, "-af", "ClusterId", "ProcId", "JobStatus"], check=False)
    for line in done.stdout.splitlines():
        cluster, proc, status = line.split()
        return f"{cluster}.{proc}", int(status)
    return None


def _running_mid_run(pool: Pool, workdir: Path, run_id: str) -> str:
    """Wait until the train job runs its third epoch, a second into it; its job id."""

    def third_epoch() -> str | None:
        job = _train_job(pool, run_id)
        started = epochs(workdir / "started.log")
        return job[0] if job and job[1] == 2 and started and started[-1] >= 3 else None

    job_id = pool.wait_until(third_epoch, "the train job's third epoch")
    pool.wait_until(lambda: _train_job(pool, run_id) == (job_id, 2), "the train job running")
    return str(job_id)




def _events(workdir: Path, run_id: str) -> str:
    return (workdir / ".dagflow" / "runs" / run_id / "condor" / "dagflow.jobs.log").read_text()


def _assert_resumed_from_checkpoint(pool: Pool, workdir: Path, run_id: str) -> list[int]:
    status = pool.ended(workdir, run_id)
    train = next(node for node in status["nodes"] if node["node"] == "train")
    assert status["state"] == "succeeded", status
    assert train["attempts"] == 1, train  # one DAG node attempt: no retry was used
    assert re.search(r"^004 .*Job was evicted", _events(workdir, run_id), re.MULTILINE), "no eviction seen"
    assert epochs(workdir / "ckpt" / "epochs.log") == list(range(1, EPOCHS + 1))  # every epoch's work kept
    started = epochs(workdir / "started.log")
    repeated = len(started) - EPOCHS
    assert 0 <= repeated <= 1, f"epochs started: {started}"
    assert sorted(set(started)) == list(range(1, EPOCHS + 1))
    return started


@pytest.mark.parametrize("mode", ["transfer", "shared"])
def test_a_vacated_train_job_restarts_from_its_last_checkpoint(condor_pool: Pool, mode: str) -> None:
    workdir = _pipeline(condor_pool, f"ckvacate-{mode}")
    run_id = _submit(condor_pool, workdir, mode)
    job_id = _running_mid_run(condor_pool, workdir, run_id)
    condor_pool.run(["condor_vacate_job", job_id])
    started = _assert_resumed_from_checkpoint(condor_pool, workdir, run_id)
    print(f"{mode}: epochs started {started}")


_DRAIN = """
import sys, htcondor2
collector = htcondor2.Collector()
startd = htcondor2.Startd(collector.locate(htcondor2.DaemonType.Startd))
if sys.argv[1] == "drain":
    print(startd.drainJobs(htcondor2.DrainType.Quick, reason=sys.argv[2]))
else:
    startd.cancelDrainJobs(sys.argv[2])
"""


@pytest.mark.condor_pool_exclusive
def test_a_train_job_on_a_drained_machine_restarts_from_its_last_checkpoint(condor_pool: Pool) -> None:
    # `dagflow agent watch` runs `condor_drain -quick -reason ...` on a spot notice; this release has no
    # condor_drain binary, so the same request (DRAIN_JOBS, quick) goes through the Python bindings.
    workdir = _pipeline(condor_pool, "ckdrain")
    run_id = _submit(condor_pool, workdir, "transfer")
    _running_mid_run(condor_pool, workdir, run_id)
    request = condor_pool.run([sys.executable, "-c", _DRAIN, "drain", DRAIN_REASON], env=AUTHENTICATED).stdout.strip()
    try:
        condor_pool.wait_until(lambda: "Job was evicted" in _events(workdir, run_id), "the drain to evict the job")
    finally:
        condor_pool.run([sys.executable, "-c", _DRAIN, "cancel", request], env=AUTHENTICATED)
    started = _assert_resumed_from_checkpoint(condor_pool, workdir, run_id)
    print(f"drain: epochs started {started}")


def test_a_job_that_always_checkpoints_is_removed_after_max_restarts(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("ckcap")
    write_train(workdir)
    text = (
        "name: ckcap\n"
        "steps:\n"
        "  train:\n"
        "    kind: train\n"
        "    command: python train.py 1000 1\n"
        f"    env: {{EPOCH_WITNESS: {workdir / 'started.log'}}}\n"
        "    checkpoint: {files: [ckpt], exit_code: 85, max_restarts: 3}\n"
    )
    (workdir / "pipeline.yaml").write_text(text, encoding="utf-8")
    condor_pool.give(workdir)
    run_id = _submit(condor_pool, workdir, "shared")
    status = condor_pool.ended(workdir, run_id)
    train = next(node for node in status["nodes"] if node["node"] == "train")
    assert status["state"] == "failed" and train["state"] == "failed", status
    assert "CheckpointNumber >= 3" in (train["why"] or ""), train
    started = epochs(workdir / "started.log")
    # removed at the first periodic evaluation after its 4th checkpoint (PERIODIC_EXPR_INTERVAL = 5 s here)
    assert 4 <= len(started) < 20, started
