"""`--gpus` checked against the devices this machine has: naming a GPU that is not there is bad input."""

from __future__ import annotations

import shutil
import subprocess

from dagflow.engines.local.cpu_only import is_cpu_only
from dagflow.engines.local.resources import ResourceError, parse_gpu_list


def present_devices() -> set[str]:
    """Every name a GPU here answers to (its index and its UUID), as nvidia-smi lists them; empty without one."""
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return set()
    try:
        result = subprocess.run(
            [nvidia_smi, "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return set()
    return {name.strip() for line in result.stdout.splitlines() for name in line.split(",") if name.strip()}


def check_devices(text: str, option: str = "--gpus") -> str:
    """text, when every device it names exists here; otherwise ResourceError (exit 2) naming the missing."""
    if is_cpu_only(text):
        return text
    named = [gpu.index for gpu in parse_gpu_list(text)]
    if not named:
        return text
    present = present_devices()
    missing = [name for name in named if name not in present]
    if missing:
        have = ", ".join(sorted(present)) if present else "none (nvidia-smi finds no GPU)"
        raise ResourceError(f"{option} {text}: no GPU {', '.join(missing)} on this machine; GPUs here: {have}")
    return text
