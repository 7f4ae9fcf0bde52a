"""What the Grid Engine engine keeps in a run directory, under `<run>/sge/` (the Slurm engine's layout):

    scripts/         one job script per submitted unit, `<submission>-<unit>.sh`
    jobs.jsonl       one line per submitted job: {"sub": n, "job": number, "unit": name, "tasks": {task: node}}
    cancelled        the submission number `dagflow cancel` stopped
    wrapper.log      the job scripts' own output (nodes write to logs/<node>.out|.err)

Array task ids start at 1 (Grid Engine's), a single-node job's task is -1.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.slurm.records import JobRecord, SlurmRecords

__all__ = ["JobRecord", "SgeRecords"]


class SgeRecords(SlurmRecords):
    def __init__(self, run_dir: Path) -> None:
        self.dir = Path(run_dir) / "sge"
