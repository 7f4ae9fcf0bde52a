"""What an engine's ingest saw that the run's journal cannot say: `observed.json` in the run directory.

An engine whose own scheduler drives the run (condor's DAGMan) journals what it saw at ingest
(run/journal.py); the rest is kept here, by the same ingest, and `dagflow status` reads it with the
journal (run/status.py `read_status`), writing nothing:

    {"format": 1, "engine": its name, "key": what it was read from (the engine's, to tell that nothing
     changed since), "alive": the scheduler still drives the run, "started", "finished", "finished_at":
     the run's, as the scheduler tells them, "notes": [lines], "extra": {the engine's part of `status
     --json`}, "resume_hint": command, "nodes": {node: [state, attempts, rc, why, started, ended, restarts]}}

`nodes` are the records the journal shows otherwise: a job waiting in the queue or held, and why (an idle
job's reason, from the schedd), and what the scheduler tells that the journal's events do not. The file is
replaced whole (a reader sees an old one or a new one) and ends with a line holding its checksum; one that
is damaged or of another format is none.
"""

from __future__ import annotations

import contextlib
import json
import zlib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dagflow.files import write_atomic
from dagflow.run.journal import JournalState, NodeRecord

OBSERVED_FILE = "observed.json"
FORMAT = 1


def record_row(record: NodeRecord) -> list[Any]:
    return [record.state, record.attempts, record.rc, record.why, record.started, record.ended, record.restarts]


@dataclass(slots=True)
class Observed:
    engine: str
    key: dict[str, Any]
    alive: bool
    started: float | None = None
    finished: str | None = None
    finished_at: float | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    resume_hint: str | None = None
    nodes: dict[str, NodeRecord] = field(default_factory=dict)

    def write(self, run_dir: Path) -> None:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["nodes"] = {name: record_row(record) for name, record in self.nodes.items()}
        body = json.dumps({"format": FORMAT, **data}).encode()
        write_atomic(Path(run_dir) / OBSERVED_FILE, body + b"\n%08x" % zlib.crc32(body))

    def apply(self, journal: JournalState) -> None:
        """The journal as the scheduler tells the run: its nodes' records and the run's times and end."""
        journal.nodes.update(self.nodes)
        journal.started = self.started if self.started is not None else journal.started
        journal.finished, journal.finished_at = self.finished, self.finished_at


_FIELDS = [item.name for item in fields(Observed)]


def read_observed(run_dir: Path) -> Observed | None:
    """The run's observed.json, or None (none kept, damaged, or of another format)."""
    with contextlib.suppress(OSError, ValueError, RecursionError, TypeError, KeyError, IndexError):
        body, _, check = (Path(run_dir) / OBSERVED_FILE).read_bytes().rpartition(b"\n")
        data = json.loads(body) if check == b"%08x" % zlib.crc32(body) else None
        if isinstance(data, dict) and data.pop("format", None) == FORMAT:
            nodes = {str(name): NodeRecord(*row[:6], restarts=row[6]) for name, row in data.pop("nodes").items()}
            observed = Observed(**data, nodes=nodes)
            if isinstance(observed.key, dict) and isinstance(observed.notes, list):
                return observed
    return None
