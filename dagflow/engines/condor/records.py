"""What the condor engine keeps in a run directory, beside the shared plan.json, journal and logs/:

    condor/                  the compiled DAG (`dagflow compile` output) and everything DAGMan writes:
        <pipeline>.dag, <step>.sub, <pipeline>.status (node status file),
        <pipeline>.jobstate.log, dagflow.jobs.log (the nodes' job event log),
        <pipeline>.dag.condor.sub, .dagman.out, .dagman.log (the DAGMan job's own), .rescueNNN
    condor/run.json          {"engine": "condor", "dag": path, "schedd": name|null, "pool": host|null,
                              "data_mode": "transfer"|"shared",
                              "submissions": [{"cluster": id, "t": time, "rescue": N|null,
                                                  "removed": time|null}, ...]}

Node stdout/stderr go to the shared logs/<node>.out|.err, so `dagflow logs` works for condor runs too.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from dagflow.engines.condor.dag_writer import DagFiles
from dagflow.files import write_atomic

ENGINE = "condor"
RECORD_FILE = "run.json"


def condor_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "condor"


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
        try:
            raw = json.loads(cls.path(run_dir).read_text())
        except FileNotFoundError:
            return None
        subs = [Submission(**item) for item in raw.pop("submissions", [])]
        return cls(**raw, submissions=subs)

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


def is_condor_run(run_dir: Path) -> bool:
    return CondorRecord.path(run_dir).is_file()
