"""A condor run as the files DAGMan and the jobs write tell it, for its ingest (ingest.py; no condor_q, and
the schedd is asked only why a live DAG's idle jobs wait):

- the node status file: every node's DAG-level state (including not-ready and futile ones) and the
  retries it used, as of DAGMan's last rewrite (every 60 s, and when the DAG ends);
- the jobstate log: each node's latest DAG event as it happens, its attempt number, and whether
  DAGMan is running (DAGMAN_STARTED / DAGMAN_FINISHED with its exit code);
- the nodes' job event log: per node's latest job, hold reasons, exit codes, evictions and times;
- the DAGMan job's own event log: whether the DAGMan job is queued, running, held or gone;
- DAGMan's debug log (`<dag>.dagman.out`): its exit status and ERROR lines, the only trace of a DAGMan
  that aborted before running any node (a DAG parse error, a warning made fatal by DAGMAN_USE_STRICT).

For each node the newest of the three pictures wins (on equal times: jobstate log, then event log,
then node status file). A cancelled run adds a fourth, the cancel itself (run.json's `removed`, or the
DAGMan job's end): it wins over a node's queued, running or held record of the same second, since these
files write whole seconds and a removed DAGMan removes all its node jobs. The result is what the ingest
folds into the run's journal and its observed record (run/observed.py), which `dagflow status` reads as it
reads every engine's run; held jobs, queued jobs and the DAGMan job's facts are what condor adds.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from dagflow.engines.condor import event_log as ev
from dagflow.engines.condor import idle_reasons
from dagflow.engines.condor import status_files as sf
from dagflow.engines.condor.dagman_start import not_started_reason
from dagflow.engines.condor.jobstate import EVENT_STATES, JobstateLog, NodeHistory, read_jobstate
from dagflow.engines.condor.records import CondorRecord, condor_dir
from dagflow.engines.condor.submit_writer import EVENT_LOG
from dagflow.plan.index import PlanIndex
from dagflow.run.journal import (
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    NodeRecord,
)
from dagflow.run.layout import RunLayout, RunNotFoundError
from dagflow.run.observed import Observed
from dagflow.run.status import HELD, QUEUED

_SNAPSHOT_STATES = {
    sf.NOT_READY: PENDING,
    sf.READY: PENDING,
    sf.PRERUN: RUNNING,
    sf.SUBMITTED: QUEUED,
    sf.POSTRUN: RUNNING,
    sf.DONE: SUCCEEDED,
    sf.ERROR: FAILED,
    sf.FUTILE: UPSTREAM_FAILED,
}
_JOB_STATES = {ev.QUEUED: QUEUED, ev.RUNNING: RUNNING, ev.HELD_STATE: HELD, ev.REMOVED: FAILED}
# DAGMan's own exit codes: 0 the DAG succeeded, 2 DAGMan was removed or aborted; anything else failed.
_DAGMAN_EXIT_STATES = {0: SUCCEEDED, 2: INTERRUPTED}
_LIVE_STATES = (QUEUED, RUNNING, HELD)  # a node's states while it has a job in the queue (or a script running)
_LIVE_JOBS = (ev.QUEUED, ev.RUNNING, ev.HELD_STATE)  # the event log's states of a job in the queue
_DAGMAN_OUT_TAIL = 64 * 1024  # the bytes of .dagman.out read: its last run's end is all status needs
_DAGMAN_OUT_LINE = re.compile(rb"^(?:\d\d/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? )?(.*?)[ \t\r]*$", re.MULTILINE)
_BATCH_ID = re.compile(rb"Workflow batch-id: <(\d+)\.\d+>")
_EXITING = re.compile(rb"EXITING WITH STATUS (-?\d+)")
_DAG_STATUS = re.compile(r"^DAG status: \d+ \((\w+)\)")
_FATAL_WARNING = "Warning is fatal"
_ERRORS_SHOWN = 3


@dataclass(slots=True)
class DagmanExit:
    """How the latest DAGMan run ended, from the end of its .dagman.out."""

    status: int  # its EXITING WITH STATUS
    errors: list[str] = field(default_factory=list)  # its last ERROR lines (and the warning made fatal)
    dag_status: str | None = None  # e.g. DAG_STATUS_NODE_FAILED
    at: float | None = None  # the file's modification time

    @property
    def reason(self) -> str | None:
        if self.status == 0:
            return None
        return "; ".join(self.errors) or self.dag_status or f"DAGMan exited with status {self.status}"


def read_dagman_out(path: Path, cluster: int, since: float) -> DagmanExit | None:
    """The exit of DAGMan job `cluster` (submitted at `since`), or None if .dagman.out shows none yet.

    The file is appended to by every DAGMan run of the DAG (resubmits); the run's `Workflow batch-id`
    line names its job, and when that line is out of the tail read, the file must be newer than the
    submission."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _DAGMAN_OUT_TAIL))
            tail = handle.read()
            at = os.fstat(handle.fileno()).st_mtime
    except FileNotFoundError:
        return None
    batches = list(_BATCH_ID.finditer(tail))
    if batches:
        if int(batches[-1].group(1)) != cluster:
            return None
        tail = tail[batches[-1].end() :]
    elif at < since:
        return None
    exiting = list(_EXITING.finditer(tail))
    if not exiting:
        return None
    lines = [line.decode("utf-8", "replace") for line in _DAGMAN_OUT_LINE.findall(tail[: exiting[-1].start()])]
    result = DagmanExit(int(exiting[-1].group(1)), _error_lines(lines), at=at)
    statuses = [match.group(1) for line in lines if (match := _DAG_STATUS.match(line))]
    result.dag_status = statuses[-1] if statuses else None
    return result


def _error_lines(lines: list[str]) -> list[str]:
    """The last ERROR lines; a warning made fatal (DAGMAN_USE_STRICT) is preceded by its warning."""
    picked: list[str] = []
    last_warning: str | None = None
    for line in lines:
        if line.startswith("Warning:"):
            last_warning = line
        elif "ERROR:" in line:
            if _FATAL_WARNING in line and last_warning is not None:
                picked.append(last_warning)
            picked.append(line)
    return picked[-_ERRORS_SHOWN:]


def _snapshot_state(ad: sf.NodeStatusAd) -> str:
    if ad.status == sf.SUBMITTED:
        if ad.procs_held:
            return HELD
        return RUNNING if ad.details == "running" else QUEUED
    return _SNAPSHOT_STATES.get(ad.status, PENDING)


def _job_state(job: ev.NodeJob) -> str:
    if job.state == ev.EXITED:
        return SUCCEEDED if job.exit_code == 0 else FAILED
    return _JOB_STATES[job.state]


def _why(state: str, job: ev.NodeJob | None, ad: sf.NodeStatusAd | None, exit_code: int | None) -> str | None:
    if state == HELD and job is not None and job.hold_reason:
        code = f" (HoldReasonCode {job.hold_code})" if job.hold_code is not None else ""
        return f"held: {job.hold_reason}{code}"
    if state in (FAILED, RETRYING, INTERRUPTED) and job is not None and job.state == ev.REMOVED:
        why = f"removed: {job.removed_reason}" if job.removed_reason else "removed"
        # removed by its periodic_remove for a hold (a timeout, a declared input file missing): say which
        return f"{why} (after hold: {job.hold_reason})" if job.hold_reason else why
    if state in (FAILED, RETRYING):
        if exit_code is not None:
            return f"exit code {exit_code}"
        if job is not None and job.signal is not None:
            return f"killed by signal {job.signal}"
        if ad is not None and ad.details:
            return ad.details
    if state in (QUEUED, RUNNING) and job is not None and job.evictions:
        return f"evicted {job.evictions}x" + (f", held {job.holds}x" if job.holds else "")
    return None


def _dagman_job(record: CondorRecord) -> ev.NodeJob | None:
    """The latest DAGMan job's state, from its own (small) event log; None before it has one."""
    latest = record.latest
    if latest is None:
        return None
    return ev.job_of(ev.read_events(record.dagman_log, {latest.cluster}, strict=False))


def fold(
    index: PlanIndex,
    snapshot: sf.NodeStatusFile | None,
    history: JobstateLog | None,
    jobs: dict[str, ev.NodeJob],
    dagman_alive: bool,
    cancelled_at: float | None = None,
) -> dict[str, NodeRecord]:
    """Every node's record from the three files (see the module docstring for who wins), in plan order, of
    the nodes with a record.

    A node whose job was removed failed, as DAGMan counts it, unless the whole run was cancelled
    (`cancelled_at`: when, see _cancelled_at).
    """
    snapshot_nodes = snapshot.nodes if snapshot else {}
    snapshot_at = (snapshot.timestamp or 0.0) if snapshot else 0.0
    histories = history.nodes if history else {}
    records: dict[str, NodeRecord] = {}
    steps = list(index.steps.values())
    step_of, parent_counts, parent_list = index.step_of, index.parent_counts, index.parent_list
    failed_or_below = bytearray(len(index))
    first_parent = 0
    for position, name in enumerate(index.names):  # topological order: parents first
        parents_from, first_parent = first_parent, first_parent + parent_counts[position]
        ad = snapshot_nodes.get(name)
        seen = histories.get(name)
        job = jobs.get(name)
        state, at = (_snapshot_state(ad), snapshot_at) if ad is not None else (PENDING, -1.0)
        # DAGMan's node status file is rewritten at most every minute, from the events it has read by then:
        # for a node with a job in the queue, the event log it reads them from is never behind it.
        in_queue = job is not None and state in _LIVE_STATES and job.state in _LIVE_JOBS
        from_job = job is not None and ((job.updated or 0.0) >= at or in_queue)
        if from_job:
            state, at = _job_state(job), job.updated or 0.0
        if seen is not None and seen.at >= at and not (from_job and _submit_echo(seen, job)):
            state, at = EVENT_STATES[seen.event], seen.at
        exit_code = seen.exit_code if seen is not None and seen.exit_code is not None else None
        if exit_code is None and job is not None:
            exit_code = job.exit_code
        attempts = seen.attempt if seen is not None else (job.jobs if job is not None else 0)
        run_attempts = seen.run_attempts if seen is not None else attempts  # retries restart in a rescue run
        if from_job and job is not None and job.jobs > attempts:
            # The job event log is ahead of DAGMan's jobstate log (a resubmitted run's first jobs): the
            # attempts its jobs show, not the earlier submission's count (one node's story told twice).
            run_attempts += job.jobs - attempts
            attempts = job.jobs
        if ad is not None and state not in (PENDING, UPSTREAM_FAILED):
            run_attempts = max(run_attempts, ad.retry_count + 1)
            attempts = max(attempts, run_attempts)
        if state == FAILED and dagman_alive and steps[step_of[position]].retried_after(run_attempts, exit_code):
            state = RETRYING
        elif cancelled_at is not None and _interrupted_by_cancel(state, at, job, cancelled_at):
            state = INTERRUPTED
        if state in (FAILED, UPSTREAM_FAILED):
            failed_or_below[position] = 1
        elif (
            state == PENDING
            and not dagman_alive
            and any(failed_or_below[parent] for parent in parent_list[parents_from:first_parent])
        ):
            state = UPSTREAM_FAILED  # DAGMan stopped before its last status file said so
            failed_or_below[position] = 1
        if state == PENDING and attempts == 0 and job is None:
            continue  # the default record: leave it out, as the journal does
        records[name] = NodeRecord(
            state,
            attempts,
            exit_code if state in (SUCCEEDED, FAILED, RETRYING) else None,
            _why(state, job, ad, exit_code),
            (job.started if job is not None else None) or (seen.started if seen is not None else None),
            (job.ended if job is not None else None) or (seen.ended if seen is not None else None),
        )
    return records


def _submit_echo(seen: NodeHistory, job: ev.NodeJob) -> bool:
    """Whether the jobstate log's latest line is DAGMan's SUBMIT of the very job whose event-log state is
    at hand: that job's own log already says it was submitted and what came after. A job reusing a claim
    runs within its submit's second, and DAGMan writes EXECUTE only once it reads the event log, so that
    SUBMIT (of the same second, or later) would show a running job queued."""
    return seen.event == "SUBMIT" and seen.condor_id.partition(".")[0] == str(job.cluster)


def _interrupted_by_cancel(state: str, at: float, job: ev.NodeJob | None, cancelled_at: float) -> bool:
    """Whether a cancelled run's node, in `state` since `at`, was interrupted by the cancel: its job was
    removed, or it was still live when the cancel came. The files write whole seconds, so a record of
    the cancel's own second cannot be ordered against it: the cancel wins that tie."""
    if state == FAILED:
        return job is not None and job.state == ev.REMOVED
    # cancelled_at is infinite when the cancel's time is unknown: every live node was interrupted
    return state in _LIVE_STATES and (math.isinf(cancelled_at) or math.floor(at) <= math.floor(cancelled_at))


def _cancelled_at(record: CondorRecord, outcome: str | None, ended: float | None) -> float | None:
    """When an interrupted run was cancelled: the later of `dagflow cancel`'s record and the DAGMan job's
    end (a DAGMan removed by other means has only the latter); None for a run that was not."""
    if outcome != INTERRUPTED:
        return None
    removed = record.latest.removed if record.latest is not None else None
    known = [at for at in (removed, ended) if at is not None]
    return max(known) if known else math.inf


def _of_latest_submission(history: JobstateLog, cluster: int) -> bool:
    """Whether the log's latest DAGMAN_STARTED is the DAGMan job `cluster` (its id reads `N.0`)."""
    return bool(history.dagman_ids) and history.dagman_ids[-1].split(".")[0] == str(cluster)


def _dagman_started(history: JobstateLog | None, dagman: ev.NodeJob | None, cluster: int) -> bool:
    """Whether DAGMan job `cluster` ran, by its files (its own event log, the jobstate log)."""
    if dagman is not None and dagman.state not in (ev.QUEUED, ev.HELD_STATE):
        return True
    return history is not None and _of_latest_submission(history, cluster)


def _run_outcome(
    record: CondorRecord,
    history: JobstateLog | None,
    snapshot: sf.NodeStatusFile | None,
    dagman: ev.NodeJob | None,
    exited: DagmanExit | None = None,
) -> tuple[bool, str | None, float | None]:
    """(DAGMan alive, the run's end state if it ended, when it ended)."""
    if record.latest is None:
        return False, None, None
    if record.latest.removed is not None and not _dagman_started(history, dagman, record.latest.cluster):
        return False, INTERRUPTED, record.latest.removed  # removed before it ran: no event will say so
    if history is not None and not _of_latest_submission(history, record.latest.cluster):
        # The log ends with an earlier DAGMan's finish (a resubmitted run whose new DAGMan has not
        # started yet): that outcome is not this submission's.
        history = replace(history, finished=None, exit_code=None, last_started=None)
    finished_at = None
    if history is not None and history.finished is not None and history.last_started is not None:
        finished_at = history.finished
        if dagman is None or dagman.state in (ev.EXITED, ev.REMOVED):
            state = _DAGMAN_EXIT_STATES.get(history.exit_code if history.exit_code is not None else 1, FAILED)
            return False, state, finished_at
    if dagman is not None and dagman.state in (ev.EXITED, ev.REMOVED):
        if dagman.state == ev.REMOVED:
            return False, INTERRUPTED, dagman.ended or finished_at
        code = dagman.exit_code if isinstance(dagman.exit_code, int) else 1
        return False, _DAGMAN_EXIT_STATES.get(code, FAILED), dagman.ended or finished_at
    if history is not None and history.finished is not None and history.last_started is not None:
        # DAGMan wrote that it finished, but its job's exit is not logged yet: it is on its way out.
        state = _DAGMAN_EXIT_STATES.get(history.exit_code if history.exit_code is not None else 1, FAILED)
        return False, state, finished_at
    if exited is not None:  # DAGMan said it exits, before its job's exit is logged (or with no event log)
        return False, _DAGMAN_EXIT_STATES.get(exited.status, FAILED), exited.at
    if snapshot is not None and snapshot.complete and snapshot.dag_status == sf.DONE and dagman is None:
        return False, SUCCEEDED, snapshot.timestamp
    return True, None, None


def condor_record(layout: RunLayout) -> CondorRecord:
    if not layout.plan_path.is_file():
        layout.load_plan()  # raises: no such run
    record = CondorRecord.load(layout.run_dir)
    if record is None:
        raise RunNotFoundError(f"run {layout.run_id} was not run with the condor engine")
    return record


def event_log_path(layout: RunLayout) -> Path:
    return condor_dir(layout.run_dir).absolute() / EVENT_LOG


def observe_files(layout: RunLayout, record: CondorRecord, index: PlanIndex) -> Observed:
    """The run as DAGMan's files tell it (see the module docstring), every node's record; writes nothing.
    A live DAG's idle jobs are explained by asking the schedd."""
    files = record.files
    snapshot = sf.read_node_status(files.node_status)
    history = read_jobstate(files.jobstate_log)
    jobs = ev.node_jobs(ev.read_events(event_log_path(layout), strict=False, kinds=ev.JOB_KINDS))
    dagman = _dagman_job(record)
    latest = record.latest
    exited = read_dagman_out(record.dagman_out, latest.cluster, latest.t) if latest is not None else None
    alive, outcome, ended = _run_outcome(record, history, snapshot, dagman, exited)
    records = fold(index, snapshot, history, jobs, alive, _cancelled_at(record, outcome, ended))
    if alive:  # only a live DAG's idle jobs are worth asking the schedd about
        idle_reasons.explain_idle(index, records, jobs, record)
    extra = _extra(record, dagman, jobs, snapshot)
    extra["dagman_exit_code"] = exited.status if exited is not None else None
    extra["dagman_reason"] = exited.reason if exited is not None and outcome != SUCCEEDED else None
    if alive and latest is not None and not _dagman_started(history, dagman, latest.cluster):
        extra["dagman_reason"] = not_started_reason(record, latest.cluster)
    started = (history.started if history else None) or (record.submissions[0].t if record.submissions else None)
    return Observed(
        engine="condor", key={}, alive=alive, started=started, finished=outcome, finished_at=ended,
        notes=_notes(extra, files.dag), extra=extra, resume_hint=f"dagflow resubmit {layout.run_id}", nodes=records,
    )  # fmt: skip


def _extra(
    record: CondorRecord, dagman: ev.NodeJob | None, jobs: dict[str, ev.NodeJob], snapshot: sf.NodeStatusFile | None
) -> dict[str, Any]:
    latest = record.latest
    held = {
        name: {"cluster": job.cluster, "reason": job.hold_reason, "code": job.hold_code, "subcode": job.hold_subcode}
        for name, job in jobs.items()
        if job.state == ev.HELD_STATE
    }
    return {
        "dagman_job": f"{latest.cluster}.0" if latest else None,
        "dagman_state": dagman.state if dagman else (None if latest is None else "submitted"),
        "dagman_hold_reason": dagman.hold_reason if dagman and dagman.state == ev.HELD_STATE else None,
        "schedd": record.schedd,
        "pool": record.pool,
        "submissions": len(record.submissions),
        "dag": record.dag,
        "dag_status": sf.STATUS_NAMES[snapshot.dag_status] if snapshot and snapshot.dag_status in range(8) else None,
        "status_file_time": snapshot.timestamp if snapshot else None,
        "held": held,
        "data_mode": record.data_mode,
        # The transfer mode sends a job's stdout and stderr back when it ends (`dagflow logs` says so).
        "output_arrives": "its output comes back when the job ends" if record.data_mode == "transfer" else None,
    }


def _notes(extra: dict[str, Any], dag: Path) -> list[str]:
    if extra["dagman_job"] is None:
        return [f"not submitted; compiled DAG: {dag} (submit it with `dagflow resubmit`)"]
    where = extra["schedd"] or "the local schedd"
    if extra["pool"]:
        where += f" in pool {extra['pool']}"
    line = f"DAGMan job {extra['dagman_job']} on {where} ({extra['dagman_state']})"
    if extra["dagman_hold_reason"]:
        line += f", held: {extra['dagman_hold_reason']}"
    if extra.get("dagman_exit_code") is not None:
        line += f", exited with status {extra['dagman_exit_code']}"
    notes = [line]
    if extra["held"]:
        notes.append(f"{len(extra['held'])} held job(s): release with condor_release, or cancel the run")
    return notes
