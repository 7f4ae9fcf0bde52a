"""What a batch engine's submission produced (Slurm and Grid Engine alike)."""

from __future__ import annotations

from dataclasses import dataclass

from dagflow.run.layout import RunLayout


@dataclass(frozen=True, slots=True)
class Submitted:
    layout: RunLayout
    sub: int  # which submission of this run (1 for the first, +1 per resume)
    nodes: int  # nodes submitted
    jobs: list[str]  # the batch system's job ids (an array counts once)
    seconds: float  # time spent submitting
