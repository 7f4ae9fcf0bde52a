"""GPU memory and utilisation of running nodes, sampled through NVML while they run.

The local runner samples only while a node that holds GPUs runs, once every `interval_s`, from its own
event loop (a timer, no thread). Each sample reads, per device the running nodes hold, the device's
utilisation and its compute processes with their GPU memory. A node's GPU memory is what its own
processes (those in its process group) hold on its devices; when none of a device's processes can be
told apart (NVML lists pids of another pid namespace, e.g. inside a container) and only this node holds
the device, the device's used memory counts instead. A node's utilisation is the mean over samples of
the mean over its devices. Without NVML (no driver, no GPU) nothing is sampled and nodes get None.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

DEFAULT_INTERVAL_S = 1.0


class GpuReader(Protocol):
    """What a sampler reads per device (named as CUDA_VISIBLE_DEVICES names it: index or UUID)."""

    def utilization_pct(self, device: str) -> float | None: ...

    def processes(self, device: str) -> list[tuple[int, float]]:
        """(pid, GPU memory in MB) of the device's compute processes."""
        ...

    def memory_used_mb(self, device: str) -> float | None: ...

    def close(self) -> None: ...


@dataclass(slots=True)
class GpuStats:
    memory_peak_mb: float | None = None
    utilization_sum: float = 0.0
    utilization_samples: int = 0

    @property
    def utilization_pct(self) -> float | None:
        return self.utilization_sum / self.utilization_samples if self.utilization_samples else None


@dataclass(slots=True)
class _Watched:
    pgid: int | None
    devices: tuple[str, ...]
    stats: GpuStats = field(default_factory=GpuStats)


class GpuSampler:
    """Collects GPU statistics for nodes between `watch` and `finish`."""

    def __init__(self, reader: GpuReader | None, interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.reader = reader
        self.interval_s = interval_s
        self._watched: dict[str, _Watched] = {}
        self._next: float | None = None

    def watch(self, node: str, devices: Iterable[str], pgid: int | None) -> None:
        """Start sampling a node on its devices (its processes are those of process group pgid)."""
        devices = tuple(devices)
        if self.reader is None or not devices:
            return
        self._watched[node] = _Watched(pgid, devices)
        if self._next is None:
            self._next = time.monotonic()  # a first sample at once: short nodes get one too

    def set_pgid(self, node: str, pgid: int) -> None:
        watched = self._watched.get(node)
        if watched is not None:
            watched.pgid = pgid

    def finish(self, node: str) -> GpuStats | None:
        """Stop sampling the node; its statistics (None when it was never watched)."""
        watched = self._watched.pop(node, None)
        if not self._watched:
            self._next = None
        return watched.stats if watched is not None else None

    def due_in(self, now: float) -> float | None:
        """Seconds until the next sample is due; None when nothing is watched."""
        return None if self._next is None else max(0.0, self._next - now)

    def maybe_sample(self, now: float) -> None:
        if self._next is None or now < self._next:
            return
        self._next = now + self.interval_s
        self.sample()

    def sample(self) -> None:
        reader = self.reader
        if reader is None or not self._watched:
            return
        devices = {device for watched in self._watched.values() for device in watched.devices}
        holders: dict[str, int] = {}
        for watched in self._watched.values():
            for device in watched.devices:
                holders[device] = holders.get(device, 0) + 1
        readings = {device: _read(reader, device) for device in devices}
        for watched in self._watched.values():
            memory = 0.0
            known = False
            utilizations = []
            for device in watched.devices:
                utilization, processes, used = readings[device]
                if utilization is not None:
                    utilizations.append(utilization)
                mine = [mb for pid, mb in processes if watched.pgid is not None and _pgid(pid) == watched.pgid]
                if mine:
                    memory += sum(mine)
                    known = True
                elif used is not None and processes and holders[device] == 1 and not _any_pid_here(processes):
                    memory += used
                    known = True
                elif processes or used is not None:
                    known = True  # the device was readable: this node holds none of its memory
            stats = watched.stats
            if known:
                stats.memory_peak_mb = memory if stats.memory_peak_mb is None else max(stats.memory_peak_mb, memory)
            if utilizations:
                stats.utilization_sum += sum(utilizations) / len(utilizations)
                stats.utilization_samples += 1


def _read(reader: GpuReader, device: str) -> tuple[float | None, list[tuple[int, float]], float | None]:
    utilization: float | None = None
    processes: list[tuple[int, float]] = []
    used: float | None = None
    with contextlib.suppress(Exception):  # a device that stops answering leaves this sample out
        utilization = reader.utilization_pct(device)
    with contextlib.suppress(Exception):
        processes = reader.processes(device)
    with contextlib.suppress(Exception):
        used = reader.memory_used_mb(device)
    return utilization, processes, used


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _any_pid_here(processes: list[tuple[int, float]]) -> bool:
    """Whether some listed pid is a process of this pid namespace (so pids can be told apart)."""
    return any(_pgid(pid) is not None for pid, _ in processes)


class NvmlReader:
    """GpuReader over NVML (nvidia-ml-py). `open()` returns None where NVML cannot start (no driver)."""

    def __init__(self, nvml: Any) -> None:
        self._nvml = nvml
        self._handles: dict[str, Any] = {}

    @classmethod
    def open(cls) -> NvmlReader | None:
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
        except Exception:  # NVMLError (no driver, no device) or a library that cannot load
            return None
        return cls(pynvml)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()

    def _handle(self, device: str) -> Any:
        handle = self._handles.get(device)
        if handle is None:
            nvml = self._nvml
            if device.isdigit():
                handle = nvml.nvmlDeviceGetHandleByIndex(int(device))
            else:
                handle = nvml.nvmlDeviceGetHandleByUUID(device)
            self._handles[device] = handle
        return handle

    def utilization_pct(self, device: str) -> float | None:
        return float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle(device)).gpu)

    def processes(self, device: str) -> list[tuple[int, float]]:
        listed = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle(device))
        # usedGpuMemory is None where the driver cannot tell (e.g. without privileges on some systems)
        return [(p.pid, p.usedGpuMemory / 2**20) for p in listed if p.usedGpuMemory is not None]

    def memory_used_mb(self, device: str) -> float | None:
        return self._nvml.nvmlDeviceGetMemoryInfo(self._handle(device)).used / 2**20
