"""GPU detection: NVML first (nvidia-ml-py), `nvidia-smi` as the fallback."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

QUERY_FIELDS = ("index", "name", "memory.total", "compute_cap", "driver_version")
# A GPU's usable memory is its total less what the driver reserves (memory.reserved): CUDA's total memory,
# which HTCondor's GPU discovery advertises as GlobalMemoryMb (an H100 80GB: 81559 MiB total, 480 reserved,
# 81079 usable), so {gpu.memory_mb} and gpu_memory placement read the same number on every engine.
RESERVED = "memory.reserved"
# Drivers before ~510 do not know compute_cap (nor memory.reserved); each is asked again without what its
# nvidia-smi named as unknown.
FIELD_SETS = ((*QUERY_FIELDS, RESERVED), QUERY_FIELDS, ("index", "name", "memory.total", "driver_version"))
LEGACY_FIELDS = FIELD_SETS[-1]


def nvidia_smi_command(fields: tuple[str, ...] = QUERY_FIELDS) -> list[str]:
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"]


class GpuDetectionError(Exception):
    """nvidia-smi ran but its output could not be read."""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: int
    name: str
    memory_mb: int  # usable memory in MiB: the total less what the driver reserves (see RESERVED)
    capability: float | None  # CUDA compute capability, e.g. 8.0; None when the driver cannot tell
    driver_version: str


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """What a node advertises: conservative values, so a job that matches fits on any of its GPUs."""

    count: int
    model: str
    memory_mb: int  # the smallest GPU's memory
    capability: float | None  # the lowest capability
    driver_version: str
    source: str  # "nvml" or "nvidia-smi"

    @classmethod
    def of(cls, gpus: Sequence[Gpu], source: str) -> GpuSummary | None:
        if not gpus:
            return None
        names = sorted({gpu.name for gpu in gpus})
        capabilities = [gpu.capability for gpu in gpus]
        return cls(
            count=len(gpus),
            model=" + ".join(names),
            memory_mb=min(gpu.memory_mb for gpu in gpus),
            capability=None if None in capabilities else min(c for c in capabilities if c is not None),
            driver_version=gpus[0].driver_version,
            source=source,
        )


def _number(text: str) -> str:
    return text.strip().split()[0] if text.strip() else ""


def parse_nvidia_smi(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]` output."""
    gpus = []
    for line_number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("index"):
            continue
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(fields):
            raise GpuDetectionError(
                f"nvidia-smi line {line_number}: expected {len(fields)} fields, got {len(values)}: {line!r}"
            )
        row = dict(zip(fields, values, strict=True))
        capability = _number(row.get("compute_cap", ""))
        reserved = _number(row.get(RESERVED, ""))
        try:
            gpus.append(
                Gpu(
                    index=int(row["index"]),
                    name=row["name"],
                    memory_mb=int(float(_number(row["memory.total"])))
                    - (int(float(reserved)) if reserved[:1].isdigit() else 0),
                    capability=float(capability) if capability[:1].isdigit() else None,
                    driver_version=row["driver_version"],
                )
            )
        except ValueError as error:
            raise GpuDetectionError(f"nvidia-smi line {line_number}: {error}: {line!r}") from None
    return gpus


def detect_with_nvml() -> list[Gpu] | None:
    """None when NVML (the driver's library) is not available; the GPUs otherwise."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                Gpu(
                    index=index,
                    name=name.decode() if isinstance(name, bytes) else str(name),
                    memory_mb=_usable_mb(pynvml, handle),
                    capability=float(f"{major}.{minor}"),
                    driver_version=driver.decode() if isinstance(driver, bytes) else str(driver),
                )
            )
        return gpus
    except pynvml.NVMLError:
        return None
    finally:
        pynvml.nvmlShutdown()


def _usable_mb(pynvml: Any, handle: Any) -> int:
    """The device's total memory less what the driver reserves (NVML's version 2 memory info; a library
    without it: the total)."""
    try:
        info = pynvml.nvmlDeviceGetMemoryInfo(handle, version=pynvml.nvmlMemory_v2)
        return int(info.total - info.reserved) // (1024 * 1024)
    except (AttributeError, TypeError, pynvml.NVMLError):
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)


def detect_with_nvidia_smi(timeout_s: float = 20.0) -> list[Gpu] | None:
    """None when nvidia-smi is absent or fails (no driver, no GPU)."""
    if shutil.which("nvidia-smi") is None:
        return None
    for fields in FIELD_SETS:
        try:
            result = subprocess.run(
                nvidia_smi_command(fields), capture_output=True, text=True, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if result.returncode == 0:
            return parse_nvidia_smi(result.stdout, fields)
        if not any(field in result.stdout + result.stderr for field in set(fields) - set(LEGACY_FIELDS)):
            return None  # it names no field an older driver lacks: no GPU, no driver
    return None


def detect_gpus() -> GpuSummary | None:
    """The node's GPUs, or None on a node without NVIDIA GPUs."""
    gpus = detect_with_nvml()
    if gpus:
        return GpuSummary.of(gpus, "nvml")
    gpus = detect_with_nvidia_smi()
    return GpuSummary.of(gpus or [], "nvidia-smi")
