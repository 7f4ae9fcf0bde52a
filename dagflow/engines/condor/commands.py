"""What the condor engine's own commands run: `dagflow compile` (compile_dag) and `dagflow lint` (lint.py).
settings.py declares them (`provides`); the CLI parses the options, reaches them through the registry
(engine_feature) and prints."""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.dag_writer import DagOptions
from dagflow.plan.model import Plan


def compile_dag(plan: Plan, out_dir: Path, max_gpu_jobs: int, data_mode: str | None) -> Path:
    """Write plan's DAGMan input into out_dir, at most max_gpu_jobs GPU nodes submitted at once; the .dag file."""
    return compile_plan(plan, out_dir, options=DagOptions(max_gpu_jobs=max_gpu_jobs), data_mode=data_mode)
