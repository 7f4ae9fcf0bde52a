"""Checks against a real NVIDIA GPU: skipped where nvidia-smi finds none (CI never has one).

Run them on a GPU machine with `pytest tests/test_gpu_real.py`. They check the two GPU detectors
against each other and against the driver, that a local run hands a GPU node its own device, and that
what `dagflow agent configure` advertises for this machine matches the Requirements dagflow compiles
for a GPU step (and stops matching when the step asks for more GPU memory than the card has).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from condor_helpers import advertised_attributes, job_ad, machine_ad, node_submit, step
from local_run import run_local
from test_local_support import make_plan, node
from test_local_support import step as local_step

from dagflow.agent.configure import ConfigureOptions, configure
from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.lint import parse_dag
from dagflow.engines.local import RunOptions
from dagflow.engines.local.resources import detect_machine
from dagflow.gpus import detect_with_nvidia_smi, detect_with_nvml
from dagflow.plan import Node, Plan, Resources
from dagflow.run.layout import RunLayout
from tests.condor_pool import unpacked_release_bin


def _driver_gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    return [line for line in listing.stdout.splitlines() if line.startswith("GPU ")] if listing.returncode == 0 else []


DRIVER_GPUS = _driver_gpus()
pytestmark = pytest.mark.skipif(not DRIVER_GPUS, reason="no NVIDIA GPU on this machine (nvidia-smi -L lists none)")


def test_nvml_and_nvidia_smi_find_the_same_gpus() -> None:
    by_smi = detect_with_nvidia_smi()
    by_nvml = detect_with_nvml()
    assert by_smi is not None and len(by_smi) == len(DRIVER_GPUS)
    if by_nvml is None:
        pytest.skip("NVML (nvidia-ml-py) is not importable here")
    assert [(g.index, g.name, g.capability) for g in by_nvml] == [(g.index, g.name, g.capability) for g in by_smi]
    for nvml, smi in zip(by_nvml, by_smi, strict=True):
        assert abs(nvml.memory_mb - smi.memory_mb) <= 1  # NVML bytes vs nvidia-smi MiB, rounded
        assert smi.capability is not None and smi.capability >= 3.0


def test_the_local_engine_discovers_every_gpu() -> None:
    machine = detect_machine(None, need_gpus=True)
    assert len(machine.gpus) == len(DRIVER_GPUS)
    assert machine.gpu_source == "nvidia-smi"


_PROBE = (
    "import json, os; found = {'visible': os.environ.get('CUDA_VISIBLE_DEVICES')}\n"
    "try:\n"
    "    import torch\n"
    "    found['count'] = torch.cuda.device_count()\n"
    "    x = torch.ones(1024, 1024, device='cuda')\n"
    "    found['sum'] = float((x @ x).sum())\n"
    "except ImportError:\n"
    "    pass\n"
    "print(json.dumps(found))\n"
)


def test_a_gpu_node_gets_one_device_it_can_compute_on(tmp_path: Path) -> None:
    gpu = step_with_gpus(1)
    plan = make_plan(tmp_path, [gpu], [node("probe", "gpu", "")])
    plan.nodes["probe"].argv = [sys.executable, "-c", _PROBE]
    result = run_local(plan, RunOptions(runs_dir=tmp_path / "runs", jobs=1))
    assert result.ok, result.failures
    found = json.loads(RunLayout(tmp_path / "runs", plan.run_id).stdout_path("probe").read_text())
    assert found["visible"] in {str(index) for index in range(len(DRIVER_GPUS))}
    if "count" in found:  # torch is installed: the node sees exactly its one device, and it computes
        assert found["count"] == 1
        assert found["sum"] == 1024.0**3


def test_asking_for_more_gpus_than_exist_fails_before_anything_starts(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, [step_with_gpus(len(DRIVER_GPUS) + 1)], [node("greedy", "gpu", "touch ran")])
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "run", str(write_plan(plan, tmp_path)), "--runs-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"needs {len(DRIVER_GPUS) + 1} GPUs; this machine has {len(DRIVER_GPUS)}" in done.stdout + done.stderr
    assert not (tmp_path / "ran").exists()


def _discovered_by_htcondor() -> list[dict[str, object]]:
    """This machine's GPUs as HTCondor's own condor_gpu_discovery describes them (the nested GPUs_GPU_<id>
    ads a startd advertises and a job's RequireGPUs is matched against): its Common fields, then each
    device's own."""
    release = unpacked_release_bin()
    if release is None:
        pytest.skip("no HTCondor release here to run condor_gpu_discovery")
    tool = release.parent / "libexec" / "condor_gpu_discovery"
    done = subprocess.run([str(tool), "-properties"], capture_output=True, text=True, timeout=120, check=True)
    ads = {
        name: dict(re.findall(r'(\w+)=("[^"]*"|[^;]+);', body))
        for name, body in re.findall(r"^(\w+)=\[(.*)\]$", done.stdout, re.M)
    }
    common = ads.pop("Common", {})
    devices = []
    for fields in ({**common, **own} for own in ads.values()):
        devices.append({"GlobalMemoryMb": int(fields["GlobalMemoryMb"]), "Capability": float(fields["Capability"]),
                        "DeviceName": fields["DeviceName"].strip('"')})  # fmt: skip
    return devices


def test_dagflow_and_htcondor_agree_on_each_gpus_memory() -> None:
    """{gpu.memory_mb} and gpu_memory placement read the same number locally (nvidia-smi, NVML), on
    Slurm and Grid Engine (nvidia-smi) and on HTCondor (its discovery's GlobalMemoryMb): usable memory."""
    discovered = [device["GlobalMemoryMb"] for device in _discovered_by_htcondor()]
    by_smi = detect_with_nvidia_smi()
    assert by_smi is not None and [gpu.memory_mb for gpu in by_smi] == discovered
    by_nvml = detect_with_nvml()
    if by_nvml is not None:
        assert [gpu.memory_mb for gpu in by_nvml] == discovered


def test_the_agents_advertised_gpu_matches_compiled_requirements(tmp_path: Path) -> None:
    """The agent's slot attributes plus the per-GPU ads HTCondor's discovery gives this machine's startd
    (the compiled job matches each GPU by RequireGPUs): a step within the card matches, more memory or a
    newer capability than the card has does not."""
    result = configure(ConfigureOptions(config_dir=tmp_path, region="test", reconfig=False, imds_timeout_s=0.2))
    advertised = advertised_attributes(result.path)
    assert advertised["HAS_GPU"] is True
    devices = _discovered_by_htcondor()
    assert len(devices) == len(DRIVER_GPUS)
    memory_mb = min(int(advertised["GPUs_GlobalMemoryMb"]), *(int(d["GlobalMemoryMb"]) for d in devices))  # type: ignore[call-overload]
    capability = float(advertised["CUDACapability"])
    assert capability == min(float(d["Capability"]) for d in devices)  # type: ignore[arg-type]
    machine = machine_ad(devices=devices)
    machine.update(advertised)

    def job_for(gpu_memory_mb: int, cuda_capability: float):  # type: ignore[no-untyped-def]
        resources = Resources(
            cpus=1, memory_mb=1024, gpus=1, gpu_memory_mb=gpu_memory_mb, cuda_capability=cuda_capability
        )
        plan = Plan(
            "gpucheck",
            "run-1",
            "pipeline.yaml",
            {"train": step("train", "train", resources=resources, axes=())},
            {"train": Node("train", "train", ["python", "train.py"], {}, {})},
            workdir=str(tmp_path),
        )
        out = tmp_path / f"dag-{gpu_memory_mb}-{cuda_capability}"
        return job_ad(node_submit(parse_dag(compile_plan(plan, out)), "train"))

    assert job_for(memory_mb // 2, capability).symmetricMatch(machine)
    assert not job_for(memory_mb + 1024, capability).symmetricMatch(machine)
    assert not job_for(memory_mb // 2, capability + 1.0).symmetricMatch(machine)


def step_with_gpus(count: int):  # type: ignore[no-untyped-def]
    return local_step("gpu", resources=Resources(gpus=count))


def write_plan(plan: Plan, directory: Path) -> Path:
    path = directory / "plan.json"
    path.write_text(plan.to_json())
    return path
