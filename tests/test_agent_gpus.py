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
    _fake_nvidia_smi(tmp_path, f'cat "{DATA / "nvidia-smi-8xA100-80GB.csv"}"\n')
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
