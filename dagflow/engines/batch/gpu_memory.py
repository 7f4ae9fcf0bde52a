"""{gpu.memory_mb} on Slurm and Grid Engine: the memory of the GPUs the job was given, asked of nvidia-smi.

The batch system names the job's devices in CUDA_VISIBLE_DEVICES (Slurm's gres/gpu sets it); each one's
memory is nvidia-smi's memory.total of that index (as the local engine numbers devices), the smallest of
several wins, as on the other engines.
"""

from __future__ import annotations

from dagflow.gpu_memory import GPU_MEMORY, GpuMemoryUnknownError, has_gpu_memory_mark, with_gpu_memory

__all__ = ["GpuMemoryUnknownError", "fill_batch_gpu_memory"]


def fill_batch_gpu_memory(argv: list[str], env: dict[str, str]) -> list[str]:
    """argv with {gpu.memory_mb} filled in (env in place); GpuMemoryUnknownError when it cannot be."""
    if not (has_gpu_memory_mark(argv) or has_gpu_memory_mark(env)):
        return argv
    from dagflow.gpus import GpuDetectionError, detect_with_nvidia_smi

    visible = [name.strip() for name in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if name.strip()]
    if not visible:
        raise GpuMemoryUnknownError(f"{{{GPU_MEMORY}}}: the job was given no GPU (CUDA_VISIBLE_DEVICES is empty)")
    try:
        found = detect_with_nvidia_smi() or []
    except GpuDetectionError:
        found = []  # unreadable output: every device's memory is unknown, which fails the node below
    memory = {str(gpu.index): gpu.memory_mb for gpu in found}
    return with_gpu_memory(argv, env, [(name, memory.get(name)) for name in visible])
