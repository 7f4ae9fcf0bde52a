"""What the Slurm engine keeps in a run directory: the batch engines' records (engines/batch/records.py)
under `<run>/slurm/`, and in runs made before the shared Python node wrapper, `node.sh`: the bash wrapper
their scripts sourced."""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.batch.records import BatchRecords, JobRecord

__all__ = ["JobRecord", "SlurmRecords"]


class SlurmRecords(BatchRecords):
    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, "slurm")

    @property
    def node_sh(self) -> Path:
        return self.dir / "node.sh"

    def create(self, node_sh: str = "") -> None:
        super().create()
        if node_sh:
            self.node_sh.write_text(node_sh)
