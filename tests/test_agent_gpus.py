"""GPU detection on captured nvidia-smi output, and the NVML-then-nvidia-smi order."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from dagflow import gpus
from dagflow.gpus import GpuDetectionError, GpuSummary, parse_nvidia_smi

DATA = Path(__file__).parent / "data"


def test_eight_a100_80gb() -> None:
    found = parse_nvidia_smi((DATA / "nvidia-smi-8xA100-80GB.csv").read_text())
    assert [gpu.index for gpu in found] == list(range(8))
    summary = GpuSummary.of(found, "nvidia-smi")
    assert summary is not None
    assert (summary.count, summary.model, summary.memory_mb, summary.capability, summary.driver_version) == (
        8,
        "NVIDIA A100-SXM4-80GB",
        81920,
        8.0,
        "535.183.01",
    )


def test_one_t4_with_header_and_units() -> None:
    summary = GpuSummary.of(parse_nvidia_smi((DATA / "nvidia-smi-1xT4.csv").read_text()), "nvidia-smi")
    assert summary is not None
    assert (summary.count, summary.model, summary.memory_mb, summary.capability) == (1, "Tesla T4", 15360, 7.5)


def test_mixed_gpus_advertise_the_weakest() -> None:
    text = "0, NVIDIA A100-SXM4-80GB, 81920, 8.0, 535.1\n1, Tesla T4, 15360, 7.5, 535.1\n"
    summary = GpuSummary.of(parse_nvidia_smi(text), "nvidia-smi")
    assert summary is not None
    assert (summary.count, summary.memory_mb, summary.capability) == (2, 15360, 7.5)
    assert summary.model == "NVIDIA A100-SXM4-80GB + Tesla T4"


def test_garbled_output_is_an_error() -> None:
    with pytest.raises(GpuDetectionError, match="line 1"):
        parse_nvidia_smi("0, Tesla T4, 15360\n")


# What a driver without memory.reserved says when asked for it (the form it uses for compute_cap).
NO_RESERVED = (
    'case "$1" in *memory.reserved*) echo \'Field "memory.reserved" is not a valid field to query.\'; exit 2;; esac\n'
)


def test_usable_memory_is_the_total_less_the_reserved() -> None:
    """An H100 80GB as its driver 580 reports it (captured on a lent machine): 81559 MiB total, 480 reserved;
    81079 MiB is what CUDA can allocate and what HTCondor's GPU discovery advertises (GlobalMemoryMb)."""
    (h100,) = parse_nvidia_smi((DATA / "nvidia-smi-1xH100-reserved.csv").read_text(), gpus.FIELD_SETS[0])
    assert (h100.name, h100.memory_mb, h100.capability) == ("NVIDIA H100 80GB HBM3", 81079, 9.0)
    (unknown,) = parse_nvidia_smi("0, NVIDIA A10, 23028, 8.6, 535.1, [N/A]\n", gpus.FIELD_SETS[0])
    assert unknown.memory_mb == 23028


def test_asks_for_the_reserved_memory_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_nvml: None
) -> None:
    capture = DATA / "nvidia-smi-1xH100-reserved.csv"
    _fake_nvidia_smi(tmp_path, f'case "$1" in *memory.reserved*) cat "{capture}"; exit 0;; esac\nexit 9\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    summary = gpus.detect_gpus()
    assert summary is not None and summary.memory_mb == 81079


def _fake_nvidia_smi(directory: Path, script: str) -> None:
    path = directory / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hide NVML (`import pynvml` fails), so a machine with a real GPU and driver tests the same way."""
    monkeypatch.setitem(sys.modules, "pynvml", None)


def test_falls_back_to_nvidia_smi_when_nvml_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_nvml: None
) -> None:
    _fake_nvidia_smi(tmp_path, f'{NO_RESERVED}cat "{DATA / "nvidia-smi-8xA100-80GB.csv"}"\n')
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert gpus.detect_with_nvml() is None
    summary = gpus.detect_gpus()
    assert summary is not None and summary.source == "nvidia-smi" and summary.count == 8


def test_old_driver_without_compute_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_nvml: None) -> None:
    old = DATA / "nvidia-smi-old-driver.txt"
    legacy = DATA / "nvidia-smi-1xT4-legacy.csv"
    _fake_nvidia_smi(
        tmp_path,
        f'case "$1" in *compute_cap*) cat "{old}"; exit 2;; esac\ncat "{legacy}"\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    summary = gpus.detect_gpus()
    assert summary is not None
    assert (summary.count, summary.memory_mb, summary.capability) == (1, 15360, None)


def test_no_gpus_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, without_nvml: None) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpus.detect_gpus() is None
