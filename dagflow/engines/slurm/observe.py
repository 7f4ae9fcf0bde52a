"""Reading a Slurm run: what Slurm still holds (`squeue`, see commands.queued_jobs), folded into the run's
journal by the batch engines' observer (engines/batch/observe.py). What is Slurm's own:

- a node whose job left the queue while the journal shows it running never got to write its end: it was
  cancelled, hit the job's time limit, or lost its node. `scontrol show job` says which (there is no
  sacct without slurmdbd): CANCELLED is `interrupted`, anything else `failed`.
- a node that never started and whose job is gone, below a failed node: Slurm cancelled it
  (`kill_invalid_depend`), so it is `upstream_failed`.
- a waiting node shows as `pending` while its parents run (Dependency), `held` when held, else `queued`.
"""

from __future__ import annotations

from typing import ClassVar

from dagflow.engines.batch.observe import BatchObserver
from dagflow.engines.batch.records import JobRecord
from dagflow.engines.slurm import commands
from dagflow.run.journal import FAILED, INTERRUPTED, PENDING, Event, end_event
from dagflow.run.status import HELD, QUEUED

# Slurm job states a node's job can end in without the wrapper journaling it, and what they mean.
_SLURM_END = {
    "TIMEOUT": "hit the Slurm time limit",
    "OUT_OF_MEMORY": "ran out of memory (Slurm)",
    "NODE_FAIL": "its Slurm node failed",
    "PREEMPTED": "preempted by Slurm",
    "BOOT_FAIL": "its Slurm node failed to boot",
    "DEADLINE": "missed its Slurm deadline",
    "FAILED": "the batch job failed before the node ended",
}

_HELD_REASONS = ("JobHeldUser", "JobHeldAdmin")


class SlurmObserver(BatchObserver[commands.QueuedJob]):
    engine: ClassVar[str] = "slurm"
    title: ClassVar[str] = "Slurm"
    still_queued: ClassVar[str] = "still in Slurm's queue"

    def lost_nodes(self, lost: list[str], jobs: list[JobRecord], cancelled: bool) -> list[Event]:
        refs = {node: record.ref(task) for record in jobs for task, node in record.tasks.items()}
        states = commands.job_states([refs[name] for name in lost])
        events: list[Event] = []
        for name in lost:
            slurm_state, _ = states.get(refs[name], ("", ""))
            slurm_state = slurm_state.split("+")[0]
            if slurm_state in ("CANCELLED", "") or slurm_state not in _SLURM_END:
                why = "cancelled" if slurm_state == "CANCELLED" else "its Slurm job ended without a result"
                events.append(end_event(name, INTERRUPTED, why=why))
            else:
                events.append(end_event(name, FAILED, why=_SLURM_END[slurm_state]))
        return events

    def waiting_state(self, job: commands.QueuedJob) -> tuple[str, str | None] | None:
        if job.state != "PENDING":
            return None
        if job.reason == "Dependency":
            return PENDING, None
        return (HELD if job.reason in _HELD_REASONS else QUEUED), job.reason


OBSERVER = SlurmObserver(commands.queued_jobs)
