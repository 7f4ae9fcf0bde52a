"""What the condor engine keeps in a run directory, beside the shared plan.json, journal and logs/:

    condor/                  the compiled DAG (`dagflow compile` output) and everything DAGMan writes:
        <pipeline>.dag, <step>.sub, <pipeline>.status (node status file),
        <pipeline>.jobstate.log, dagflow.jobs.log (the nodes' job event log),
        <pipeline>.dag.condor.sub, .dagman.out, .dagman.log (the DAGMan job's own), .rescueNNN
    condor/run.json          {"engine": "condor", "dag": path, "schedd": name|null, "pool": host|null,
                              "data_mode": "transfer"|"shared", "batch_name": name|null,
                              "submissions": [{"cluster": id, "t": time, "rescue": N|null,
                                                  "removed": time|null}, ...]}

Node stdout/stderr go to the shared logs/<node>.out|.err, so `dagflow logs` works for condor runs too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dagflow.bounded import BoundedInputError, loads_json, read_bounded
from dagflow.errors import DagflowError
from dagflow.files import write_atomic

ENGINE = "condor"
RECORD_FILE = "run.json"


MAX_RECORD_BYTES = 1024 * 1024  # a run's submissions: a few dozen bytes each


class CondorRecordError(DagflowError):
    """condor/run.json is unreadable or damaged: the run cannot be followed; it names the file."""


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def condor_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "condor"


@dataclass(frozen=True, slots=True)
class DagFiles:
    """The DAG's own output files (absolute paths)."""

    dag: Path
    node_status: Path
    jobstate_log: Path
    dot: Path

    @classmethod
    def in_dir(cls, out_dir: Path, stem: str) -> DagFiles:
        return cls(
            dag=out_dir / f"{stem}.dag",
            node_status=out_dir / f"{stem}.status",
            jobstate_log=out_dir / f"{stem}.jobstate.log",
            dot=out_dir / f"{stem}.dot",
        )


@dataclass(slots=True)
class Submission:
    cluster: int  # the DAGMan job's ClusterId
    t: float
    rescue: int | None = None  # the rescue DAG number it ran from (resubmit), if any
    removed: float | None = None  # when `dagflow cancel` had the schedd remove it


@dataclass(slots=True)
class CondorRecord:
    dag: str  # absolute path of the .dag file
    schedd: str | None = None  # the schedd name given at submit (None: the local schedd)
    pool: str | None = None  # the collector given at submit (None: this host's configuration)
    submissions: list[Submission] = field(default_factory=list)
    engine: str = ENGINE
    data_mode: str = "shared"  # transfer or shared (runs recorded before data modes were shared)
    batch_name: str | None = None  # what condor_q shows its jobs under (manners.py; None: the run id)

    @property
    def files(self) -> DagFiles:
        dag = Path(self.dag)
        return DagFiles.in_dir(dag.parent, dag.stem)

    @property
    def dagman_log(self) -> Path:
        """The DAGMan job's own event log (condor_submit_dag's `log = <dag>.dagman.log`)."""
        return Path(self.dag + ".dagman.log")

    @property
    def dagman_out(self) -> Path:
        """DAGMan's own debug log (`<dag>.dagman.out`): why it aborted, and its exit status."""
        return Path(self.dag + ".dagman.out")

    @property
    def latest(self) -> Submission | None:
        return self.submissions[-1] if self.submissions else None

    @classmethod
    def path(cls, run_dir: Path) -> Path:
        return condor_dir(run_dir) / RECORD_FILE

    @classmethod
    def load(cls, run_dir: Path) -> CondorRecord | None:
        """The run's record; None when it has none; CondorRecordError when it is damaged."""
        path = cls.path(run_dir)
        try:
            raw = loads_json(read_bounded(path, MAX_RECORD_BYTES))
        except FileNotFoundError:
            return None
        except OSError as error:
            raise CondorRecordError(f"{path}: cannot be read ({error.strerror})") from None
        except BoundedInputError as error:
            raise CondorRecordError(f"{path}: damaged: {error}") from None
        try:
            subs = [Submission(**item) for item in raw.pop("submissions", [])]
            record = cls(**raw, submissions=subs)
        except (TypeError, AttributeError) as error:  # not an object, a field missing or unknown
            raise CondorRecordError(f"{path}: damaged: not a condor run record ({error})") from None
        if not record._well_typed():
            raise CondorRecordError(f"{path}: damaged: a field of a wrong type")
        return record

    def _well_typed(self) -> bool:
        texts = (self.schedd, self.pool, self.batch_name)
        times = [number for sub in self.submissions for number in (sub.t, sub.removed) if number is not None]
        return (
            isinstance(self.dag, str) and isinstance(self.engine, str) and isinstance(self.data_mode, str)
            and all(text is None or isinstance(text, str) for text in texts)
            and all(_is_int(sub.cluster) and (sub.rescue is None or _is_int(sub.rescue)) for sub in self.submissions)
            and all(isinstance(number, int | float) and not isinstance(number, bool) for number in times)
        )  # fmt: skip

    def save(self, run_dir: Path) -> None:
        write_atomic(self.path(run_dir), (json.dumps(asdict(self), indent=1) + "\n").encode())

    def add_submission(self, run_dir: Path, cluster: int, rescue: int | None = None) -> Submission:
        submission = Submission(cluster, round(time.time(), 3), rescue)
        self.submissions.append(submission)
        self.save(run_dir)
        return submission


    def mark_removed(self, run_dir: Path) -> None:
        """Record that the latest DAGMan job was removed: the only trace of a job that never started,
        whose event log the schedd could not write."""
        if self.latest is not None:
            self.latest.removed = round(time.time(), 3)
            self.save(run_dir)

