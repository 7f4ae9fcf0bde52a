"""The GPU sampler (engines/local/gpu_sampler.py) with a stand-in for NVML and real processes: which GPU
memory is a node's, utilisation means, and when samples are due. The NVML reader itself is checked
against a real GPU in test_usage_gpu_real.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from dagflow.engines.local.gpu_sampler import GpuSampler

FOREIGN_PID = 2**22 + 17  # above Linux's largest pid_max: a pid of another pid namespace, as NVML may list


class StandIn:
    def __init__(self) -> None:
        self.utilization: dict[str, float | None] = {}
        self.listed: dict[str, list[tuple[int, float]]] = {}
        self.used: dict[str, float | None] = {}
        self.broken: set[str] = set()

    def _check(self, device: str) -> None:
        if device in self.broken:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    def utilization_pct(self, device: str) -> float | None:
        self._check(device)
        return self.utilization.get(device)

    def processes(self, device: str) -> list[tuple[int, float]]:
        self._check(device)
        return self.listed.get(device, [])

    def memory_used_mb(self, device: str) -> float | None:
        self._check(device)
        return self.used.get(device)

    def close(self) -> None:
        pass


@pytest.fixture
def node_process() -> Iterator[subprocess.Popen[bytes]]:
    """A real process in a process group of its own, with a child in the same group."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys, time; subprocess.Popen(['sleep', '60']); time.sleep(60)"],
        process_group=0,
    )
    yield proc
    os.killpg(proc.pid, 9)
    proc.wait()


def test_a_node_gets_the_gpu_memory_of_its_own_processes(node_process: subprocess.Popen[bytes]) -> None:
    gpus = StandIn()
    sampler = GpuSampler(gpus)
    sampler.watch("train", ["0"], node_process.pid)
    gpus.listed["0"] = [(node_process.pid, 1000.0), (os.getpid(), 5000.0)]  # the second is not the node's
    gpus.utilization["0"] = 30.0
    gpus.used["0"] = 7000.0
    sampler.sample()
    gpus.listed["0"] = [(node_process.pid, 400.0)]
    gpus.utilization["0"] = 90.0
    sampler.sample()
    stats = sampler.finish("train")
    assert stats is not None and stats.memory_peak_mb == 1000.0 and stats.utilization_pct == 60.0


def test_foreign_pids_charge_the_device_to_its_only_holder(node_process: subprocess.Popen[bytes]) -> None:
    gpus = StandIn()
    sampler = GpuSampler(gpus)
    sampler.watch("alone", ["0"], node_process.pid)
    sampler.watch("a", ["1"], node_process.pid)
    sampler.watch("b", ["1"], node_process.pid)
    gpus.listed = {"0": [(FOREIGN_PID, 100.0)], "1": [(FOREIGN_PID, 100.0)]}
    gpus.used = {"0": 2500.0, "1": 2500.0}
    sampler.sample()
    alone, a = sampler.finish("alone"), sampler.finish("a")
    assert alone is not None and alone.memory_peak_mb == 2500.0
    assert a is not None and a.memory_peak_mb == 0.0  # a shared device's memory cannot be told apart
    assert alone.utilization_pct is None  # no utilisation readings: none, not 0


def test_a_device_that_fails_is_left_out_of_the_sample(node_process: subprocess.Popen[bytes]) -> None:
    gpus = StandIn()
    gpus.broken.add("0")
    sampler = GpuSampler(gpus)
    sampler.watch("n", ["0"], node_process.pid)
    sampler.sample()
    stats = sampler.finish("n")
    assert stats is not None and stats.memory_peak_mb is None and stats.utilization_pct is None


def test_samples_are_due_only_while_a_gpu_node_runs() -> None:
    sampler = GpuSampler(StandIn(), interval_s=1.0)
    assert sampler.due_in(0.0) is None
    sampler.watch("cpu-only", [], 1)
    assert sampler.due_in(0.0) is None
    sampler.watch("gpu", ["0"], None)
    assert sampler.due_in(time.monotonic()) == 0.0  # a first sample at once
    sampler.maybe_sample(10**9)
    assert sampler.due_in(10**9) == 1.0
    assert sampler.finish("gpu") is not None and sampler.due_in(0.0) is None
    assert GpuSampler(None).due_in(0.0) is None
