"""`--gpus none`: a GPU pipeline smoke-tested on a machine without GPUs (or without using them).

Steps that ask for GPUs run without them instead of being refused: no node of the run sees a GPU
(CUDA_VISIBLE_DEVICES is set empty), and {gpu.memory_mb} is the step's `gpu_memory` request (the least a
GPU it runs on would have), 0 when it sets none. The run neither uses nor fills the cache, so a smoke test's
results never stand in for a real run's (nor a real run's for the smoke test). The runner says so in one line
on stderr and records it in the run directory (RECORD): `dagflow status` and the report show that the run
was a CPU smoke test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dagflow.files import write_atomic
from dagflow.plan import Plan

CPU_ONLY = "none"  # the --gpus value
RECORD = "cpu-only.json"  # in the run directory: {"gpus": "none", "steps": [the steps run without their GPUs]}


def is_cpu_only(gpus: str | None) -> bool:
    return gpus is not None and gpus.strip().lower() == CPU_ONLY


def gpu_steps(plan: Plan) -> list[str]:
    """The steps of plan's nodes that ask for GPUs."""
    return sorted({node.step for node in plan.nodes.values() if plan.steps[node.step].resources.gpus})


def announce(plan: Plan, run_dir: Path) -> None:
    """Say on stderr which steps run without their GPUs, and record it in the run directory."""
    steps = gpu_steps(plan)
    if steps:
        print(
            f"dagflow: --gpus none: {_steps(steps)} on the CPU, without GPUs "
            "(CUDA_VISIBLE_DEVICES is empty; {gpu.memory_mb} is the step's gpu_memory; nothing cached)",
            file=sys.stderr,
        )
    write_atomic(run_dir / RECORD, (json.dumps({"gpus": CPU_ONLY, "steps": steps}) + "\n").encode())


def note(run_dir: Path) -> str | None:
    """What status and the report say of a run that ran with --gpus none; None for any other run."""
    try:
        steps = json.loads((run_dir / RECORD).read_text(encoding="utf-8")).get("steps", [])
    except (OSError, ValueError, AttributeError):
        return None
    without = f": {_steps([str(step) for step in steps])} on the CPU, without GPUs" if steps else ""
    return f"a CPU smoke test (--gpus none){without}"


def _steps(steps: list[str]) -> str:
    return f"step {steps[0]} runs" if len(steps) == 1 else f"steps {', '.join(steps)} run"
