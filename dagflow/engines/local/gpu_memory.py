"""{gpu.memory_mb} for a local node: the detected memory of the GPUs it was given (the smallest of several)."""

from __future__ import annotations

from collections.abc import Sequence

from dagflow.engines.local.resources import Gpu
from dagflow.gpu_memory import GpuMemoryUnknownError
from dagflow.gpu_memory import with_gpu_memory as _fill

__all__ = ["GpuMemoryUnknownError", "with_gpu_memory"]


def with_gpu_memory(
    argv: list[str], env: dict[str, str], gpus: Sequence[Gpu], cpu_only_mb: int | None = None
) -> list[str]:
    """cpu_only_mb: under --gpus none, the value {gpu.memory_mb} takes instead (cpu_only.py)."""
    devices = [(gpu.index, gpu.memory_mb) for gpu in gpus] if cpu_only_mb is None else [("none", cpu_only_mb)]
    return _fill(argv, env, devices)
