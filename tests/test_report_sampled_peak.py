"""The report names HTCondor's memory peak for what it is: a sample (MemoryUsage), not a measured maximum."""

from __future__ import annotations

from dagflow.report.resources import step_uses, waste_lines
from dagflow.run.usage import NodeUsage
from tests.condor_helpers import regional_plan


def _usage(engine: str) -> NodeUsage:
    return NodeUsage(
        node="report", step="report", attempt=1, engine=engine, started=1.0, ended=61.0, wall_s=60.0, cpu_s=30.0,
        peak_memory_mb=6.0, gpu_memory_peak_mb=None, gpu_utilization_pct=None, host=None, slot=None,
        requested={"memory_mb": 1024.0}, allocated={}, exit_code=0, reason=None,
    )


def _report_lines(engine: str) -> list[str]:
    uses = {use.step: use for use in step_uses(regional_plan(), [_usage(engine)])}
    return waste_lines(uses["report"])


def test_condor_memory_peak_is_called_htcondors_sampled_peak() -> None:
    assert "requested 1.0 GB, HTCondor's sampled peak 6.0 MB → 99% of memory unused" in _report_lines("condor")
    assert "requested 1.0 GB, peak 6.0 MB → 99% of memory unused" in _report_lines("local")
