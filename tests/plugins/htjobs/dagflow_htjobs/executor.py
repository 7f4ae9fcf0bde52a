"""run_job, check_active and cancel_jobs on an HTCondor schedd (htcondor2), one job per node attempt.

Each job carries its attempt's key as the job attribute DagflowJobKey (and DagflowRunId, DagflowNode): every
look finds jobs by it, in the queue and then in the schedd's history, whoever submitted them. A held job
never runs on by itself here: it is removed, and its attempt ends saying why it was held.

Submit values are written in the submit language's new argument and environment syntax; a value that
cannot be said there (a newline) fails that attempt, so no value adds a submit command.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from typing import Any, ClassVar

import classad2
import htcondor2

from dagflow.engines.jobs.executor import JobExecutor
from dagflow.engines.jobs.job import ACTIVE, ENDED, QUEUED, Job, JobError, JobState

_PROJECTION = [
    "DagflowJobKey", "ClusterId", "JobStatus", "ExitCode", "ExitBySignal", "ExitSignal", "HoldReason",
    "RemoveReason",
]  # fmt: skip
_RUNNING_STATES = {2: ACTIVE, 6: ACTIVE, 7: ACTIVE}  # running, transferring output, suspended
_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


class HTJobs(JobExecutor):
    name: ClassVar[str] = "htjobs"
    summary: ClassVar[str] = "each node as one HTCondor job through the schedd, no DAGMan (a shared filesystem)"
    honours: ClassVar[frozenset[str]] = frozenset(
        {"cpus", "memory", "disk", "gpus", "priority", "timeout", "concurrency_limits"}
    )
    system: ClassVar[str] = "HTCondor"
    poll_s: ClassVar[float] = 1.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._schedd: Any = None

    @property
    def schedd(self) -> Any:
        if self._schedd is None:
            self._schedd = htcondor2.Schedd()
        return self._schedd

    def run_job(self, job: Job) -> str:
        result = self.schedd.submit(htcondor2.Submit(self.description(job)))
        return f"{result.cluster()}.0"

    def description(self, job: Job) -> dict[str, str]:
        path = job.env.get("PATH") or os.environ.get("PATH") or _DEFAULT_PATH
        program = job.argv[0]
        executable = program if os.path.isabs(program) else shutil.which(program, path=path)
        if executable is None:
            raise JobError(f"{program!r} is not on PATH ({path})")
        env = {"PATH": path, **job.env}
        res = job.resources
        own = job.step.engine_section(self.name)
        block = job.blocks.get(self.name, {})
        description = {
            "universe": "vanilla",
            "executable": executable,
            "arguments": _quoted(job.argv[1:]),
            "environment": _quoted(f"{name}={value}" for name, value in env.items()),
            "initialdir": job.workdir,
            "output": str(job.stdout),
            "error": str(job.stderr),
            "should_transfer_files": "NO",
            "request_cpus": str(res.cpus),
            "request_memory": str(res.memory_mb),
            "request_disk": str(res.disk_mb * 1024),
            "priority": str(job.step.priority),
            "batch_name": job.run_id,
            "My.DagflowJobKey": classad2.quote(job.key),
            "My.DagflowRunId": classad2.quote(job.run_id),
            "My.DagflowNode": classad2.quote(job.node),
        }
        if res.gpus:
            description["request_gpus"] = str(res.gpus)
        if own.get("concurrency_limits"):
            description["concurrency_limits"] = ",".join(own["concurrency_limits"])
        if block.get("accounting_group"):
            description["accounting_group"] = block["accounting_group"]
        for key, value in description.items():
            if "\n" in value or "\r" in value:
                raise JobError(f"{key} holds a line break, which a submit description cannot say")
        return description

    def check_active(self, jobs: Sequence[Job]) -> dict[str, JobState]:
        if not jobs:
            return {}
        wanted = {job.key for job in jobs}
        runs = " || ".join(sorted({f"DagflowRunId == {classad2.quote(job.run_id)}" for job in jobs}))
        found: dict[str, JobState] = {}
        for ad in self.schedd.query(runs, projection=_PROJECTION):
            key = ad.get("DagflowJobKey")
            if key in wanted:
                found[key] = self._state(ad)
        missing = sorted(wanted - found.keys())
        if missing:
            constraint = f"member(DagflowJobKey, {{{', '.join(classad2.quote(key) for key in missing)}}})"
            for ad in self.schedd.history(constraint, projection=_PROJECTION, match=len(missing)):
                key = ad.get("DagflowJobKey")
                if key in wanted and key not in found:
                    found[key] = self._state(ad)
        return found

    def cancel_jobs(self, jobs: Sequence[Job]) -> None:
        keys = ", ".join(classad2.quote(job.key) for job in jobs)
        self.schedd.act(htcondor2.JobAction.Remove, f"member(DagflowJobKey, {{{keys}}})", reason="dagflow: cancelled")

    def _state(self, ad: Any) -> JobState:
        status = int(ad.get("JobStatus", 0))
        if status == 1:
            return JobState(QUEUED)
        if status in _RUNNING_STATES:
            return JobState(ACTIVE)
        if status == 5:
            why = f"held: {ad.get('HoldReason', 'no reason given')}"
            self.schedd.act(htcondor2.JobAction.Remove, f"ClusterId == {int(ad['ClusterId'])}", reason=why)
            return JobState(ENDED, why=why)
        if status == 4:
            if ad.get("ExitBySignal"):
                return JobState(ENDED, rc=-int(ad.get("ExitSignal", 9)))
            return JobState(ENDED, rc=int(ad.get("ExitCode", 1)))
        return JobState(ENDED, why=f"removed: {ad.get('RemoveReason', 'no reason given')}")


def _quoted(words: Any) -> str:
    """Words in the submit language's new syntax: the whole in double quotes, each word in single quotes,
    a quote of either kind doubled."""
    return '"' + " ".join("'" + word.replace('"', '""').replace("'", "''") + "'" for word in words) + '"'
