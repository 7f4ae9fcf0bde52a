"""GPU usage sampling against a real NVIDIA GPU through NVML: skipped where nvidia-smi finds none.

A local node allocates GPU memory through the CUDA driver API (libcuda, via ctypes: no CUDA toolkit or
framework needed) and holds it; its usage record must show at least that much GPU memory at peak and a
utilisation. Run on a GPU machine with `pytest tests/test_usage_gpu_real.py`.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from local_run import run_local
from test_local_support import make_plan, node, step

from dagflow.engines.local import RunOptions
from dagflow.engines.local.gpu_sampler import NvmlReader
from dagflow.plan import Resources
from dagflow.run.usage import read_usage


def _driver_gpus() -> list[str]:
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=False)
    return [line for line in listing.stdout.splitlines() if line.startswith("GPU ")] if listing.returncode == 0 else []


pytestmark = pytest.mark.skipif(not _driver_gpus(), reason="no NVIDIA GPU on this machine (nvidia-smi -L lists none)")

# Allocates argv[1] MiB on the first visible device through the driver API and holds it argv[2] seconds.
# The device's primary context, not cuCtxCreate (whose signature CUDA 13 changed).
HOLD_GPU_MEMORY = """
import ctypes, sys, time
cuda = ctypes.CDLL("libcuda.so.1")
def check(call, *args):
    code = getattr(cuda, call)(*args)
    if code != 0:
        sys.exit(f"{call} returned CUDA error {code}")
check("cuInit", 0)
device = ctypes.c_int()
check("cuDeviceGet", ctypes.byref(device), 0)
context = ctypes.c_void_p()
check("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
check("cuCtxSetCurrent", context)
pointer = ctypes.c_uint64()
check("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(int(sys.argv[1]) << 20))
time.sleep(float(sys.argv[2]))
"""


def test_nvml_reads_the_devices() -> None:
    reader = NvmlReader.open()
    assert reader is not None, "NVML must start where nvidia-smi lists a GPU"
    try:
        assert reader.memory_used_mb("0") is not None
        utilization = reader.utilization_pct("0")
        assert utilization is not None and 0 <= utilization <= 100
        assert isinstance(reader.processes("0"), list)
    finally:
        reader.close()


def test_a_gpu_node_s_memory_peak_and_utilization_are_sampled(tmp_path: Path) -> None:
    (tmp_path / "hold_gpu.py").write_text(HOLD_GPU_MEMORY)
    plan = make_plan(
        tmp_path,
        [step("train", resources=Resources(gpus=1, memory_mb=16))],
        [node("train", "train", "python hold_gpu.py 2048 4")],
    )
    result = run_local(plan, RunOptions(runs_dir=tmp_path / "runs", use_cache=False))
    assert result.state == "succeeded", (tmp_path / "runs" / plan.run_id / "logs" / "train.err").read_text()
    (record,) = read_usage(tmp_path / "runs" / plan.run_id)
    assert record.gpu_memory_peak_mb is not None and record.gpu_memory_peak_mb >= 2048, record
    assert record.gpu_utilization_pct is not None and 0 <= record.gpu_utilization_pct <= 100
    assert record.allocated == {"gpus": 1}
