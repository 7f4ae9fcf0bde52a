"""Filling in {gpu.memory_mb} where a node starts: the smallest memory of the GPUs it was given.

A plan holds GPU_MEMORY_MARK where a template said {gpu.memory_mb}; each engine puts the value in when the
node starts (local: the assigned devices' detected memory; HTCondor: a $$() match-time substitution,
engines/condor/gpu_memory.py; Slurm and Grid Engine: the node wrapper asks nvidia-smi). Engine-neutral and
light (the batch node wrapper imports it): devices come in as (name, memory MB or None).
"""

from __future__ import annotations

from collections.abc import Sequence

GPU_MEMORY = "gpu.memory_mb"
GPU_MEMORY_MARK = "@@dagflow:gpu.memory_mb@@"


def has_gpu_memory_mark(values: list[str] | dict[str, str]) -> bool:
    texts = values.values() if isinstance(values, dict) else values
    return any(GPU_MEMORY_MARK in text for text in texts)


def fill_gpu_memory(text: str, value: str) -> str:
    return text.replace(GPU_MEMORY_MARK, value)


class GpuMemoryUnknownError(ValueError):
    pass


def with_gpu_memory(argv: list[str], env: dict[str, str], devices: Sequence[tuple[str, int | None]]) -> list[str]:
    """argv with {gpu.memory_mb} filled in (env is filled in place); GpuMemoryUnknownError when the
    node has no GPU, or one whose memory was not detected."""
    if not (has_gpu_memory_mark(argv) or has_gpu_memory_mark(env)):
        return argv
    if not devices:
        raise GpuMemoryUnknownError(f"{{{GPU_MEMORY}}}: the node got no GPU")
    unknown = [name for name, memory in devices if memory is None]
    if unknown:
        raise GpuMemoryUnknownError(
            f"{{{GPU_MEMORY}}}: the memory of GPU {', '.join(unknown)} is unknown (nvidia-smi does not list it)"
        )
    value = str(min(memory for _, memory in devices if memory is not None))
    for key, text in env.items():
        env[key] = fill_gpu_memory(text, value)
    return [fill_gpu_memory(arg, value) for arg in argv]
