"""GPU placement on the real pool: one partitionable slot holding a V100 (16 GB class, capability 7.0)
and an A100 (40 GB class, capability 8.0), so a slot-wide GPU memory attribute is undefined there.

Each GPU node writes what it was handed (CUDA_VISIBLE_DEVICES, _CONDOR_AssignedGPUs) to a file, and the
tests compare it with the job ad's AssignedGPUs and the GPUs the startd advertises.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.condor_pool import Pool

pytestmark = pytest.mark.condor_pool

# report.py: writes [CUDA_VISIBLE_DEVICES, _CONDOR_AssignedGPUs] to argv[1] (atomically); with argv[2],
# then waits for that file, so two such jobs prove they ran at the same time.
REPORT = (
    "import json, os, sys, time\n"
    "seen = [os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('_CONDOR_AssignedGPUs')]\n"
    "json.dump(seen, open(sys.argv[1] + '.tmp', 'w'))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
    "other = sys.argv[2] if len(sys.argv) > 2 else None\n"
    "for _ in range(900):\n"
    "    if other is None or os.path.exists(other):\n"
    "        sys.exit(0)\n"
    "    time.sleep(1)\n"
    "sys.exit(1)\n"
)


def _step(name: str, resources: str, *files: str, needs: str | None = None) -> str:
    argv = json.dumps(["python", "report.py", *files])
    lines = [f"  {name}:", f"    command: {argv}", f"    resources: {resources}"]
    if needs:
        lines.append(f"    needs: [{needs}]")
    return "\n".join(lines)


def _pipeline(workdir: Path, name: str, *steps: str) -> None:
    text = f"name: {name}\nsteps:\n" + "\n".join(steps) + "\n"
    (workdir / "pipeline.yaml").write_text(text, encoding="utf-8")
    (workdir / "report.py").write_text(REPORT, encoding="utf-8")


def _submit(pool: Pool, workdir: Path) -> str:
    pool.give(workdir)
    # shared: the jobs meet through files in the pipeline's directory
    done = pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir)
    return json.loads(done.stdout)["run_id"]




def _gpus(pool: Pool) -> dict[str, dict[str, str]]:
    """GPU id -> its nested GPUs_GPU_<id> ad's string fields (DeviceName, DeviceUuid ...), from the startd."""
    done = pool.run(["condor_status", "-long"])
    gpus = {}
    for ad in re.findall(r"^GPUs_GPU_\w+ = \[(.*)\]$", done.stdout, re.MULTILINE):
        fields = dict(re.findall(r'(\w+) = "([^"]*)"', ad))
        gpus[fields["Id"]] = fields
    return gpus


def _a100_and_v100(pool: Pool) -> tuple[str, str]:
    gpus = _gpus(pool)
    a100 = next(gpu for gpu, fields in gpus.items() if "A100" in fields["DeviceName"])
    v100 = next(gpu for gpu, fields in gpus.items() if "V100" in fields["DeviceName"])
    return a100, v100


def _assigned(pool: Pool, run_id: str) -> dict[str, str]:
    """Step -> the AssignedGPUs of its (finished) job, from the schedd's history."""
    done = pool.run(["condor_history", "-constraint", f'DagflowRunId == "{run_id}"', "-af", "DagflowStep",
                     "AssignedGPUs"])
    return dict(line.split(None, 1) for line in done.stdout.splitlines() if line.strip())


def _seen(workdir: Path, name: str) -> tuple[str | None, str | None]:
    visible, assigned = json.loads((workdir / name).read_text())
    return visible, assigned


def _check_sees_only(pool: Pool, seen: tuple[str | None, str | None], gpu: str) -> None:
    visible, assigned = seen
    assert assigned == gpu, seen
    # CUDA names the device by its UUID, so HTCondor sets CUDA_VISIBLE_DEVICES to GPU-<DeviceUuid>
    assert visible == f"GPU-{_gpus(pool)[gpu]['DeviceUuid']}", seen


def test_gpu_memory_and_ampere_class_land_on_the_a100_only(condor_pool: Pool) -> None:
    a100, _ = _a100_and_v100(condor_pool)
    workdir = condor_pool.workdir("gpu-a100")
    _pipeline(
        workdir,
        "gpu-a100",
        _step("big", "{gpus: 1, gpu_memory: 30GB}", "big.json"),
        _step("ampere", "{gpus: 1, gpu_class: ampere-or-newer}", "ampere.json", needs="big"),
    )
    run_id = _submit(condor_pool, workdir)
    submit_file = (workdir / ".dagflow" / "runs" / run_id / "condor" / "big.sub").read_text()
    assert re.search(r"^gpus_minimum_memory\s+= 30720$", submit_file, re.MULTILINE)
    assert "GlobalMemoryMb" not in submit_file
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    for step in ("big", "ampere"):
        _check_sees_only(condor_pool, _seen(workdir, f"{step}.json"), a100)
    assigned = condor_pool.wait_until(lambda: len(found := _assigned(condor_pool, run_id)) == 2 and found,
                                      "the jobs in the history")
    assert assigned == {"big": a100, "ampere": a100}


def test_capability_7_steps_run_at_once_one_on_each_gpu(condor_pool: Pool) -> None:
    a100, v100 = _a100_and_v100(condor_pool)
    workdir = condor_pool.workdir("gpu-both")
    resources = "{gpus: 1, cuda_capability: 7.0}"
    # each waits for the other's file: both succeed only if they ran at the same time
    _pipeline(
        workdir,
        "gpu-both",
        _step("one", resources, "one.json", "two.json"),
        _step("two", resources, "two.json", "one.json"),
    )
    run_id = _submit(condor_pool, workdir)
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    one, two = _seen(workdir, "one.json"), _seen(workdir, "two.json")
    assert {one[1], two[1]} == {a100, v100}
    assigned = condor_pool.wait_until(lambda: len(found := _assigned(condor_pool, run_id)) == 2 and found,
                                      "the jobs in the history")
    _check_sees_only(condor_pool, one, assigned["one"])
    _check_sees_only(condor_pool, two, assigned["two"])


def test_80gb_step_stays_idle_and_status_says_why(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("gpu-80gb")
    _pipeline(workdir, "gpu-80gb", _step("huge", "{gpus: 1, gpu_memory: 80GB}", "huge.json"))
    run_id = _submit(condor_pool, workdir)
    try:
        def explained() -> dict | None:
            node = condor_pool.status(workdir, run_id)["nodes"][0]
            return node if node["state"] == "queued" and node["why"] else None

        node = condor_pool.wait_until(explained, "the idle node's reason in dagflow status")
        assert "GlobalMemoryMb >= 81920" in node["why"], node
        assert "rejected by the job's requirements" in node["why"], node
        table = condor_pool.dagflow(["status", run_id], cwd=workdir, check=False).stdout
        assert "GlobalMemoryMb >= 81920" in table
        assert not (workdir / "huge.json").exists()
    finally:
        condor_pool.dagflow(["cancel", run_id], cwd=workdir, check=False)
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] != "succeeded"
    left = condor_pool.run(["condor_q", "-constraint", f'DagflowRunId == "{run_id}"', "-af", "ClusterId"])
    assert not left.stdout.strip()


def test_pool_advertises_two_different_gpus(condor_pool: Pool) -> None:
    """The premise of the tests above: without it they would prove nothing about mixed GPUs."""
    names = sorted(fields["DeviceName"] for fields in _gpus(condor_pool).values())
    assert len(names) == 2 and "A100" in names[0] and "V100" in names[1], names
