"""What this machine offers (cpus, memory, GPUs) and the accounting of what running nodes hold."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from dagflow.engines.local.cpu_only import is_cpu_only
from dagflow.errors import DagflowError
from dagflow.plan import Plan, Resources
from dagflow.text import plural


class ResourceError(DagflowError):
    """A node asks for more than this machine has, or --gpus is malformed."""


@dataclass(frozen=True, slots=True)
class Gpu:
    index: str  # as CUDA_VISIBLE_DEVICES names it
    memory_mb: int | None  # None when unknown (given with --gpus)


@dataclass(frozen=True, slots=True)
class Machine:
    cpus: int
    memory_mb: int
    gpus: tuple[Gpu, ...]
    gpu_source: str  # where the GPU list came from, for error messages
    cpu_only: bool = False  # --gpus none: steps that ask for GPUs run without them (cpu_only.py)


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def total_memory_mb() -> int:
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)


def parse_gpu_list(text: str) -> tuple[Gpu, ...]:
    """`--gpus 0,1` (device indices or UUIDs); an empty string means no GPUs."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    for item in items:
        if not re.fullmatch(r"[0-9]+|(GPU|MIG)-[A-Za-z0-9/-]+", item):
            raise ResourceError(f"--gpus: {item!r} is not a GPU index (expected e.g. --gpus 0,1)")
    if len(set(items)) != len(items):
        raise ResourceError(f"--gpus: {text!r} names a GPU twice")
    return tuple(Gpu(item, None) for item in items)


def discover_gpus() -> tuple[Gpu, ...]:
    """GPUs nvidia-smi reports (dagflow.gpus: usable memory), or none when it is absent, fails or is unreadable."""
    from dagflow.gpus import GpuDetectionError, detect_with_nvidia_smi

    try:
        found = detect_with_nvidia_smi(timeout_s=30) or []
    except GpuDetectionError:
        return ()
    return tuple(Gpu(str(gpu.index), gpu.memory_mb) for gpu in found)


def detect_machine(gpus: str | None, need_gpus: bool) -> Machine:
    """This machine; nvidia-smi is only asked when some node needs a GPU (given --gpus, for the named
    devices' memory: gpu_memory placement and {gpu.memory_mb} use it)."""
    if is_cpu_only(gpus):
        return Machine(cpu_count(), total_memory_mb(), (), f"--gpus {gpus}", cpu_only=True)
    if gpus is not None:
        found, source = parse_gpu_list(gpus), f"--gpus {gpus}"
        if need_gpus and found:
            memory = {gpu.index: gpu.memory_mb for gpu in discover_gpus()}
            found = tuple(Gpu(gpu.index, memory.get(gpu.index)) for gpu in found)
    elif need_gpus:
        found, source = discover_gpus(), "nvidia-smi"
    else:
        found, source = (), "not looked for"
    return Machine(cpu_count(), total_memory_mb(), found, source)


def infeasible(plan: Plan, machine: Machine) -> list[str]:
    """One message per step whose nodes could never start here."""
    used_steps = {node.step for node in plan.nodes.values()}
    problems = []
    for name in sorted(used_steps):
        res = plan.steps[name].resources
        if res.cpus > machine.cpus:
            problems.append(f"step {name} needs {plural(res.cpus, 'cpu')}; this machine has {machine.cpus}")
        if res.memory_mb > machine.memory_mb:
            problems.append(f"step {name} needs {res.memory_mb} MB of memory; this machine has {machine.memory_mb} MB")
        if res.gpus and not machine.cpu_only:
            suitable = [gpu for gpu in machine.gpus if _gpu_fits(gpu, res)]
            if res.gpus > len(suitable):
                have = f"{plural(len(machine.gpus), 'GPU')} ({machine.gpu_source})"
                if res.gpu_memory_mb and len(suitable) < len(machine.gpus):
                    have += f", {len(suitable)} with at least {res.gpu_memory_mb} MB"
                hint = "" if machine.gpus else "; name devices with --gpus 0,1, or run it on the CPU with --gpus none"
                problems.append(f"step {name} needs {plural(res.gpus, 'GPU')}; this machine has {have}{hint}")
    return problems


def _gpu_fits(gpu: Gpu, res: Resources) -> bool:
    return res.gpu_memory_mb is None or gpu.memory_mb is None or gpu.memory_mb >= res.gpu_memory_mb


def within(res: Resources, held: Resources) -> bool:
    """A node asking res fits in what another node holds: it may follow it (runner.py). Not one that
    needs GPUs: its devices are named when it is sent, so it could not start elsewhere first."""
    return not res.gpus and res.cpus <= held.cpus and res.memory_mb <= held.memory_mb


class ResourcePool:
    """Free cpus, memory and GPU devices. `--jobs` above the cpu count deliberately oversubscribes."""

    def __init__(self, machine: Machine, slots: int) -> None:
        self.free_cpus = max(machine.cpus, slots)
        self.free_memory_mb = machine.memory_mb
        self.free_gpus: list[Gpu] = list(machine.gpus)
        self.cpu_only = machine.cpu_only

    def acquire(self, res: Resources) -> tuple[Gpu, ...] | None:
        """Reserve res and return the GPUs given to it, or None (nothing reserved) if it does not fit."""
        if res.cpus > self.free_cpus or res.memory_mb > self.free_memory_mb:
            return None
        gpus: tuple[Gpu, ...] = ()
        if res.gpus and not self.cpu_only:
            gpus = tuple(gpu for gpu in self.free_gpus if _gpu_fits(gpu, res))[: res.gpus]
            if len(gpus) < res.gpus:
                return None
            for gpu in gpus:
                self.free_gpus.remove(gpu)
        self.free_cpus -= res.cpus
        self.free_memory_mb -= res.memory_mb
        return gpus

    def take(self, res: Resources) -> None:
        """Reserve res (no GPUs), known to fit: a follower taking what its leader just released."""
        self.free_cpus -= res.cpus
        self.free_memory_mb -= res.memory_mb

    def release(self, res: Resources, gpus: tuple[Gpu, ...]) -> None:
        self.free_cpus += res.cpus
        self.free_memory_mb += res.memory_mb
        self.free_gpus.extend(gpus)
