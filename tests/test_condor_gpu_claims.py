"""GPU claims stay with GPU jobs, on the real pool (issue #28 item 5).

The schedd keeps a claimed slot and starts the user's next idle job whose requirements match that slot's
ad (HTCondor's CLAIM_WORKLIFE: "the condor_schedd will keep running jobs on that slot as long as it has
more jobs with matching requirements"). A dynamic slot carved for a `gpus: 1` step holds that GPU, so a
CPU-only step that comes next in the DAG could run in it and leave the GPU idle. Each node here writes
what its slot held (the slot ad the starter hands the job, and the GPU variables it was given); the test
compares that with the schedd's history. The unit tests check the compiled requirements offline.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.lint import parse_dag
from dagflow.engines.condor.submit_writer import CPU_ONLY_SLOT
from tests.condor_helpers import job_ad, machine_ad, node_submit, regional_plan
from tests.condor_pool import Pool

# slot.py: writes {"visible": CUDA_VISIBLE_DEVICES, "assigned": _CONDOR_AssignedGPUs, "slot": Name,
# "dynamic": DynamicSlot, "slot_gpus": GPUs} to argv[1], the last three from the slot ad the starter hands
# the job ($_CONDOR_MACHINE_AD).
SLOT = (
    "import json, os, re, sys\n"
    "ad = open(os.environ['_CONDOR_MACHINE_AD']).read()\n"
    "def attr(name):\n"
    "    found = re.search(r'^' + name + r' = (.*)$', ad, re.MULTILINE | re.IGNORECASE)\n"
    "    return found.group(1).strip('\"') if found else None\n"
    "seen = {'visible': os.environ.get('CUDA_VISIBLE_DEVICES'),\n"
    "        'assigned': os.environ.get('_CONDOR_AssignedGPUs'),\n"
    "        'slot': attr('Name'), 'dynamic': attr('DynamicSlot'), 'slot_gpus': attr('GPUs')}\n"
    "json.dump(seen, open(sys.argv[1] + '.tmp', 'w'))\n"
    "os.rename(sys.argv[1] + '.tmp', sys.argv[1])\n"
)

PIPELINE = """\
name: gpu-claims
steps:
  train:
    kind: train
    command: ["python", "slot.py", "train.json"]
    resources: {gpus: 1, cpus: 1, memory: 128MB}
  evaluate:
    kind: evaluate
    needs: [train]
    command: ["python", "slot.py", "evaluate.json"]
    resources: {cpus: 1, memory: 128MB}
"""


def _history(pool: Pool, run_id: str) -> dict[str, dict[str, str]]:
    """Step -> its finished job's AssignedGPUs and RequestGPUs as the schedd's history records them."""
    done = pool.run(["condor_history", "-constraint", f'DagflowRunId == "{run_id}"', "-json", "-attributes",
                     "DagflowStep,AssignedGPUs,RequestGPUs,LastRemoteHost"])
    ads = json.loads(done.stdout or "[]")
    return {ad["DagflowStep"]: ad for ad in ads}


@pytest.mark.condor_pool
def test_cpu_step_after_a_gpu_step_gets_no_gpu_slot(condor_pool: Pool) -> None:
    workdir = condor_pool.workdir("gpu-claims")
    (workdir / "pipeline.yaml").write_text(PIPELINE, encoding="utf-8")
    (workdir / "slot.py").write_text(SLOT, encoding="utf-8")
    condor_pool.give(workdir)
    done = condor_pool.dagflow(["submit", "pipeline.yaml", "--json", "--data-mode", "shared"], cwd=workdir)
    run_id = json.loads(done.stdout)["run_id"]
    status = condor_pool.ended(workdir, run_id)
    assert status["state"] == "succeeded", status
    train = json.loads((workdir / "train.json").read_text())
    evaluate = json.loads((workdir / "evaluate.json").read_text())
    history = condor_pool.wait_until(lambda: len(found := _history(condor_pool, run_id)) == 2 and found,
                                     "the jobs in the history")
    print("train:", train, history["train"])  # the measurement: shown with -s, or on a failure
    print("evaluate:", evaluate, history["evaluate"])
    # the GPU step still gets its GPU: a one-GPU dynamic slot, named in its ad and its environment
    assert history["train"].get("AssignedGPUs"), history
    assert train["assigned"] == history["train"]["AssignedGPUs"], train
    assert train["slot_gpus"] == "1", train
    # the CPU step ran in a slot that holds no GPU, and its job ad names none; its environment has at most
    # the value HTCondor sets where the slot has no AssignedGPUs (ENVIRONMENT_VALUE_FOR_UnAssignedGPUs)
    assert evaluate["slot_gpus"] in (None, "0"), evaluate
    assert "AssignedGPUs" not in history["evaluate"], history
    unassigned = condor_pool.run(["condor_config_val", "ENVIRONMENT_VALUE_FOR_UnAssignedGPUs"], check=False)
    assert evaluate["assigned"] in (None, "", unassigned.stdout.strip()), evaluate
    assert "GPU-" not in (evaluate["visible"] or ""), evaluate
    # ... a dynamic slot carved for it from the partitionable slot
    assert re.fullmatch(r"slot\d+_\d+@.*", evaluate["slot"] or ""), evaluate
    assert (evaluate["dynamic"] or "").lower() == "true", evaluate


@pytest.mark.condor_pool
def test_gpu_pool_premise_two_gpus_in_one_partitionable_slot(condor_pool: Pool) -> None:
    """Without a partitionable slot holding GPUs the test above would prove nothing."""
    done = condor_pool.run(["condor_status", "-constraint", "PartitionableSlot =?= true", "-af", "TotalSlotGPUs"])
    assert [line.strip() for line in done.stdout.splitlines() if line.strip()] == ["2"], done.stdout


@pytest.fixture
def dag(tmp_path: Path):  # type: ignore[no-untyped-def]
    """fetch (CPU) -> train (1 GPU) per region, then report (CPU), compiled."""
    return parse_dag(compile_plan(regional_plan(workdir=str(tmp_path)), tmp_path / "condor", data_mode="shared"))


def test_cpu_step_requirements_refuse_a_dynamic_slot_holding_gpus(dag) -> None:  # type: ignore[no-untyped-def]
    requirements = node_submit(dag, "report").expand("requirements")
    assert requirements == (
        "(TARGET.Cpus >= RequestCpus) && (TARGET.Memory >= RequestMemory) && (TARGET.Disk >= RequestDisk)"
        " && ((TARGET.DynamicSlot =!= true) || ((TARGET.GPUs ?: 0) == 0))"
    )
    assert CPU_ONLY_SLOT in node_submit(dag, "fetch.us").expand("requirements")
    job = job_ad(node_submit(dag, "report"))
    assert job.eval("RequestGPUs") == 0
    # the GPU step's dynamic slot, which the schedd would hand this job next: refused
    assert not job.symmetricMatch(machine_ad(DynamicSlot=True))
    # a partitionable slot of a GPU machine (the startd carves a slot with no GPU), one such carved slot, a
    # static slot and a machine without GPUs: accepted
    assert job.symmetricMatch(machine_ad(PartitionableSlot=True, DynamicSlot=False, GPUs=2))
    assert job.symmetricMatch(machine_ad(DynamicSlot=True, GPUs=0))
    assert job.symmetricMatch(machine_ad())
    assert job.symmetricMatch(machine_ad(HAS_GPU=None, GPUs=None, GPUs_GlobalMemoryMb=None, CUDACapability=None))
    assert job.symmetricMatch(machine_ad(DynamicSlot=True, HAS_GPU=None, GPUs=None, GPUs_GlobalMemoryMb=None,
                                         CUDACapability=None))


def test_gpu_step_requirements_leave_gpus_to_condor_submit(dag) -> None:  # type: ignore[no-untyped-def]
    requirements = node_submit(dag, "train.us").expand("requirements")
    assert requirements == (
        "(TARGET.Cpus >= RequestCpus) && (TARGET.Memory >= RequestMemory) && (TARGET.Disk >= RequestDisk)"
        ' && (TARGET.HAS_GPU =?= true) && ((OpSys == "LINUX"))'
    )
    # naming TARGET.GPUs would stop condor_submit adding its GPU count clause
    assert "GPUs" not in requirements and "DynamicSlot" not in requirements
    job = job_ad(node_submit(dag, "train.us"))
    assert job.symmetricMatch(machine_ad(DynamicSlot=True))  # a GPU job may still reuse a GPU slot
    assert not job.symmetricMatch(machine_ad(DynamicSlot=True, GPUs=0))
