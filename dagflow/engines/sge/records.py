"""What the Grid Engine engine keeps in a run directory: the batch engines' records
(engines/batch/records.py) under `<run>/sge/`. Array task ids start at 1 (Grid Engine's), a single-node
job's task is -1."""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.batch.records import BatchRecords, JobRecord

__all__ = ["JobRecord", "SgeRecords"]


class SgeRecords(BatchRecords):
    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, "sge")
