"""What a batch engine keeps in a run directory, under `<run>/<engine>/` (`slurm/`, `sge/`):

    scripts/         one batch script per submitted unit, `<submission>-<unit>.sh`
    jobs.jsonl       one line per submitted job: {"sub": n, "job": id, "unit": name, "tasks": {task: node}}
    cancelled        the submission number `dagflow cancel` stopped
    wrapper.log      the batch scripts' own output (nodes write to logs/<node>.out|.err)

A submission is one `dagflow submit` or resume; status looks only at the latest one, since a resume
submits again every node that had not finished.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dagflow.engines.batch.script import SINGLE, CancelMarker
from dagflow.files import file_stem


@dataclass(frozen=True, slots=True)
class JobRecord:
    sub: int
    job: str
    unit: str
    tasks: dict[int, str]  # task id (-1 for a single-node job) -> node

    def ref(self, task: int) -> str:
        """How Slurm names one node's job: "123" or, for an array task, "123_4"."""
        return self.job if task == SINGLE else f"{self.job}_{task}"


class BatchRecords:
    def __init__(self, run_dir: Path, engine: str) -> None:
        self.dir = Path(run_dir) / engine

    @property
    def jobs_path(self) -> Path:
        return self.dir / "jobs.jsonl"

    @property
    def scripts_dir(self) -> Path:
        return self.dir / "scripts"

    def script_path(self, sub: int, unit: str) -> Path:
        """The batch script of one submitted unit (a step's array, or one node)."""
        return self.scripts_dir / f"{sub}-{file_stem(unit)}.sh"

    @property
    def wrapper_log(self) -> Path:
        return self.dir / "wrapper.log"

    def exists(self) -> bool:
        return self.dir.is_dir()

    def create(self) -> None:
        self.scripts_dir.mkdir(parents=True, exist_ok=True)

    def append(self, records: list[JobRecord]) -> None:
        lines = "".join(
            json.dumps({"sub": r.sub, "job": r.job, "unit": r.unit, "tasks": r.tasks}, separators=(",", ":")) + "\n"
            for r in records
        )
        with open(self.jobs_path, "a") as handle:
            handle.write(lines)
            handle.flush()
            os.fsync(handle.fileno())

    def jobs(self) -> list[JobRecord]:
        try:
            text = self.jobs_path.read_text()
        except FileNotFoundError:
            return []
        records = []
        for line in text.splitlines():
            try:
                raw = json.loads(line)
            except ValueError:  # a torn last line of an interrupted submission
                continue
            tasks = {int(task): node for task, node in raw["tasks"].items()}
            records.append(JobRecord(raw["sub"], raw["job"], raw["unit"], tasks))
        return records

    def latest(self) -> tuple[int, list[JobRecord]]:
        """(number of the latest submission, its jobs); (0, []) before the first."""
        records = self.jobs()
        if not records:
            return 0, []
        sub = max(r.sub for r in records)
        return sub, [r for r in records if r.sub == sub]

    @property
    def cancel_path(self) -> Path:
        """Holds the number of the latest submission `dagflow cancel` stopped."""
        return self.dir / "cancelled"

    def cancel_marker(self, sub: int) -> CancelMarker:
        """What the jobs of submission sub read to tell a cancel from a failure (node.py)."""
        return CancelMarker(self.cancel_path, sub)

    def mark_cancelled(self, sub: int) -> None:
        """Written before the jobs are signalled: a node wrapper that sees its node killed reads it (node.py)."""
        self.cancel_path.write_text(f"{sub}\n")

    def cancelled(self) -> int:
        try:
            return int(self.cancel_path.read_text())
        except (OSError, ValueError):
            return 0
