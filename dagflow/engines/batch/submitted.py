"""What a batch engine's submission produced (Slurm and Grid Engine alike), and how `dagflow submit`
reports it."""

from __future__ import annotations

from dataclasses import dataclass

from dagflow.engines.base import Report
from dagflow.run.layout import RunLayout


@dataclass(frozen=True, slots=True)
class Submitted:
    layout: RunLayout
    sub: int  # which submission of this run (1 for the first, +1 per resume)
    nodes: int  # nodes submitted
    jobs: list[str]  # the batch system's job ids (an array counts once)
    seconds: float  # time spent submitting

    def report(self, engine: str, system: str) -> Report:
        """The JSON summary and the line `dagflow submit` prints; system names the jobs ("Slurm")."""
        run_id = self.layout.run_id
        data = {
            "run_id": run_id,
            "engine": engine,
            "submission": self.sub,
            "nodes": self.nodes,
            "jobs": self.jobs,
            "seconds": round(self.seconds, 3),
        }
        line = (
            f"submitted run {run_id}: {self.nodes} nodes as {len(self.jobs)} {system} jobs in {data['seconds']} s; "
            f"follow it with `dagflow status {run_id}`"
        )
        return Report(data, [line])
