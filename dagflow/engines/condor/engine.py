"""The condor engine behind the shared Engine contract (the run session drives it): compile into a run
directory, submit the DAG to a schedd as one DAGMan job, read status from DAGMan's files, cancel, resubmit
from the rescue DAG."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from dagflow.engines.base import RESOURCE_FIELDS, EngineBase, EngineOption
from dagflow.engines.condor import status_warmer
from dagflow.engines.condor.compile import compile_plan, run_manners
from dagflow.engines.condor.dag_writer import DagOptions
from dagflow.engines.condor.manners import FIELDS as MANNERS
from dagflow.engines.condor.preflight import UnstartableError, refuse_unstartable, writable_or_error
from dagflow.engines.condor.records import CondorRecord, condor_dir
from dagflow.engines.condor.schedd import (
    CondorUnreachableError,
    ScheddTarget,
    dagman_description,
    reach,
    remove_job,
    submit_dagman,
)
from dagflow.engines.condor.settings import CONDOR_OPTIONS
from dagflow.engines.condor.submit_check import warn_never_matching
from dagflow.engines.condor.transfer import DataModeError, resolve_data_mode
from dagflow.errors import DagflowError
from dagflow.files import write_atomic
from dagflow.plan import Plan
from dagflow.run.journal import DONE_STATES
from dagflow.run.layout import DRY_RUN_FILE, RunLayout
from dagflow.run.live_runs import Live
from dagflow.run.reports import Cancelled, Launched
from dagflow.run.session import NothingToLaunchError, Work
from dagflow.run.status import RUN_RUNNING, RunStatus, read_status
from dagflow.spec.engine_fields import RUNTIME_FIELDS
from dagflow.text import plural

# What reads DAGMan's files back (ingest.py, jobstate.py) is imported where a run is read, waited for or
# cancelled: `dagflow submit` reads none (#41 item 3).


class CondorRunError(DagflowError):
    pass


class NothingToResubmitError(CondorRunError, NothingToLaunchError):
    """The run succeeded and its pipeline did not change since."""


def run_data_mode(plan: Plan, data_mode: str | None) -> str:
    """The run's data mode (--data-mode, else the pipeline's, else transfer). What that mode cannot run was
    refused when the pipeline was loaded, by this engine's spec check (spec_checks.py)."""
    try:
        return resolve_data_mode(data_mode, plan)
    except DataModeError as error:
        raise CondorRunError(str(error)) from None


@dataclass(frozen=True, slots=True)
class Prepared:
    layout: RunLayout
    record: CondorRecord

    @property
    def target(self) -> ScheddTarget:
        return ScheddTarget(self.record.schedd, self.record.pool)

    @property
    def dag(self) -> Path:
        return Path(self.record.dag)


@dataclass(frozen=True, slots=True)
class Submission:
    prepared: Prepared
    description: str  # the DAGMan job's submit description, as built by htcondor2.Submit.from_dag
    cluster: int | None  # None for a dry run
    rescue: int | None  # the rescue DAG number it runs from


def load_prepared(layout: RunLayout) -> Prepared:
    record = CondorRecord.load(layout.run_dir)
    if record is None:
        raise CondorRunError(f"run {layout.run_id} was not run with the condor engine")
    return Prepared(layout, record)


def newest_rescue(dag: Path) -> int | None:
    """The number of the newest rescue DAG DAGMan wrote (<dag>.rescue001, 002, ...), if any."""
    pattern = re.compile(re.escape(dag.name) + r"\.rescue(\d{3,})$")
    numbers = [int(match.group(1)) for path in dag.parent.iterdir() if (match := pattern.match(path.name))]
    return max(numbers, default=None)


def submit_prepared(prepared: Prepared, dry_run: bool = False, rescue: int | None = None) -> Submission:
    """Build the DAGMan job with htcondor2.Submit.from_dag and submit it (unless dry_run)."""
    options: dict[str, int | bool | str] = {"BatchName": prepared.record.batch_name or prepared.layout.run_id}
    if rescue is not None:
        options["DoRescueFrom"] = rescue
    description = dagman_description(prepared.dag, options)
    text = str(description)
    marker = prepared.layout.run_dir / DRY_RUN_FILE
    if dry_run:
        if not prepared.record.submissions:
            marker.touch()  # compiled to be looked at: not `latest` until `dagflow resubmit` submits it
        return Submission(prepared, text, None, rescue)
    schedd = reach(prepared.target)  # an unreachable schedd first: the compiled files are kept for it
    refuse_unstartable(prepared.dag.parent)
    warn_never_matching(prepared.dag.parent, prepared.target.pool)
    cluster = submit_dagman(schedd, prepared.target, description, prepared.dag.parent)
    prepared.record.add_submission(prepared.layout.run_dir, cluster, rescue)
    marker.unlink(missing_ok=True)
    status_warmer.spawn(prepared.layout.run_dir, cluster)  # the status is read once when the DAG ends
    return Submission(prepared, text, cluster, rescue)


WAIT_POLL_S = 2.0  # seconds between two reads of a run's files while waiting for it


class CondorEngine(EngineBase):
    """The Engine contract over htcondor2: one DAGMan job per submission; a resume submits the rescue DAG."""

    name: ClassVar[str] = "condor"
    summary: ClassVar[str] = "an HTCondor pool: the whole DAG as one DAGMan job"
    options: ClassVar[tuple[EngineOption, ...]] = CONDOR_OPTIONS
    honours: ClassVar[frozenset[str]] = frozenset(RESOURCE_FIELDS) | frozenset(RUNTIME_FIELDS)
    system: ClassVar[str] = "HTCondor"
    poll_s: ClassVar[float] = WAIT_POLL_S

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        super().__init__(runs_dir, settings)
        self.target = ScheddTarget(self.settings["schedd"], self.settings["pool"])
        self.dag_options = DagOptions(
            self.settings["max_gpu_jobs"], **{name: self.settings.get(name) for name in MANNERS}
        )

    # The backend the run session drives.

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        """Compile plan into the run's condor/ directory: a new run's (its record made, with the data mode:
        --data-mode, else the pipeline's `condor: {data_mode}`, else transfer), or a re-planned one's again."""
        run_dir = Path(run_dir)
        logs = RunLayout.from_run_dir(run_dir).logs_dir
        record = CondorRecord.load(run_dir)
        if record is not None:
            mode = run_data_mode(plan, record.data_mode)
            dag = compile_plan(plan, Path(record.dag).parent, options=self.dag_options, log_dir=logs, data_mode=mode)
            if str(dag) != record.dag:  # the pipeline was renamed: its DAG file with it
                record.dag = str(dag)
                record.save(run_dir)
            return
        mode = run_data_mode(plan, self.settings["data_mode"])
        writable_or_error(run_dir.parent)
        try:
            dag = compile_plan(plan, condor_dir(run_dir), options=self.dag_options, log_dir=logs, data_mode=mode)
        except DagflowError:
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        batch_name = run_manners(plan, self.dag_options).batch_name
        CondorRecord(dag=str(dag), schedd=self.target.name, pool=self.target.pool, data_mode=mode,
                     batch_name=batch_name).save(run_dir)  # fmt: skip

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None:
        """A run keeps the data mode it was compiled for; its edited pipeline is checked for that mode."""
        recorded = load_prepared(layout).record.data_mode
        asked = self.settings["data_mode"]
        if asked and asked != recorded:
            raise CondorRunError(f"run {layout.run_id} was compiled for the {recorded} data mode; "
                                 f"--data-mode {asked} applies to new runs only")
        return {"data_mode": recorded}

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """Submit the DAG as one DAGMan job: a new run's as compiled; a continued run's from DAGMan's newest
        rescue DAG (-DoRescueFrom N, so nodes that finished are not rerun; naming it makes the choice visible
        and fails loudly if it is gone), or, after an edit re-planned it, from a rescue DAG of our own that
        marks DONE the finished nodes the edit did not change. A run never submitted (no schedd reachable
        then) is submitted as compiled."""
        prepared = load_prepared(layout)
        dry_run = self.settings["dry_run"]
        if not work.resume or not prepared.record.submissions:
            submission = self._first_submission(prepared, fresh=not work.resume)
        elif work.edited:
            submission = self._submit_edited(prepared, work, dry_run)
        elif not work.todo:
            driver = f"DAGMan job {prepared.record.submissions[-1].cluster}.0"
            raise NothingToResubmitError(f"run {layout.run_id} succeeded: nothing to resubmit", driver)
        else:
            rescue = newest_rescue(prepared.dag)
            if rescue is None:
                raise CondorRunError(
                    f"run {layout.run_id} has no rescue DAG ({prepared.dag.name}.rescue001...): DAGMan writes one "
                    "when the DAG fails or its job is removed"
                )
            submission = submit_prepared(prepared, dry_run, rescue)
        return launched(submission)

    def _first_submission(self, prepared: Prepared, fresh: bool) -> Submission:
        layout = prepared.layout
        try:
            return submit_prepared(prepared, dry_run=self.settings["dry_run"])
        except UnstartableError:
            if fresh:  # prepared for a submission that cannot be: leave no run behind
                shutil.rmtree(layout.run_dir, ignore_errors=True)
            raise
        except CondorUnreachableError as error:
            raise CondorUnreachableError(
                f"{error}; compiled files kept in {prepared.dag.parent} "
                f"(submit them later with `dagflow resubmit {layout.run_id}`)"
            ) from None

    def _submit_edited(self, prepared: Prepared, work: Work, dry_run: bool) -> Submission:
        """The re-planned run (compiled again by prepare) from a rescue DAG of ours, DAGMan's format: the
        changed nodes and everything downstream of them run again (a DAGMan rescue DAG would keep them DONE)."""
        kept = [name for name in work.plan.nodes if name not in work.todo]
        rescue = (newest_rescue(prepared.dag) or 0) + 1
        if dry_run:
            return Submission(
                prepared, f"# would compile {work.plan.source} again and mark {plural(len(kept), 'node')} DONE",
                None, rescue,
            )  # fmt: skip
        # Node names passed escape.node_name when compiled: a DONE line holds nothing else.
        lines = ["# Rescue DAG file written by dagflow: the pipeline was edited; unchanged finished nodes are DONE"]
        lines += [f"DONE {name}" for name in kept]
        write_atomic(Path(f"{prepared.dag}.rescue{rescue:03d}"), ("\n".join(lines) + "\n").encode())
        return submit_prepared(prepared, dry_run, rescue)

    def wait(self, run_dir: Path) -> None:
        """Block until the run's DAGMan job has ended (exited or removed). DAGMan's own files say when it
        ended (its job's event log and the jobstate log), so this needs no schedd query and keeps working if
        the schedd restarts meanwhile."""
        from dagflow.engines.condor.ingest import observe_condor

        layout = RunLayout.from_run_dir(run_dir)
        while observe_condor(layout).state == RUN_RUNNING:
            time.sleep(WAIT_POLL_S)

    def ingest(self, run_dir: Path) -> bool:
        """Fold what DAGMan and the jobs wrote since the last ingest into the run directory (ingest.py)."""
        from dagflow.engines.condor.ingest import ingest_condor

        return ingest_condor(RunLayout.from_run_dir(run_dir))

    def read_status(self, layout: RunLayout) -> RunStatus:
        """The run directory as its last ingest left it (the plan's index: a big plan takes seconds)."""
        return read_status(layout, index=True)

    def cancel(self, run_dir: Path) -> Cancelled:
        """condor_rm the run's DAGMan job (DAGMan removes its node jobs and writes a rescue DAG)."""
        layout = RunLayout.from_run_dir(run_dir)
        prepared = load_prepared(layout)
        latest = prepared.record.latest
        if latest is None:
            raise CondorRunError(f"run {layout.run_id} was never submitted: nothing to cancel")
        removed = remove_job(prepared.target, latest.cluster, reason=f"dagflow cancel {layout.run_id}")
        if not removed:
            from dagflow.engines.condor.jobstate import read_jobstate

            history = read_jobstate(prepared.record.files.jobstate_log)
            gone = " (DAGMan has finished)" if history is not None and not history.dagman_running else ""
            raise CondorRunError(f"DAGMan job {latest.cluster}.0 of run {layout.run_id} is not in the queue{gone}")
        prepared.record.mark_removed(layout.run_dir)
        return Cancelled({"removed": f"{latest.cluster}.0"}, removed=f"DAGMan job {latest.cluster}.0")

    def live(self, layout: RunLayout) -> Live | None:
        from dagflow.engines.condor.ingest import status_now

        record = CondorRecord.load(layout.run_dir)
        if record is None or record.latest is None:  # never submitted: nothing of it runs
            return None
        status = status_now(layout)  # DAGMan's job alive, as `resubmit` refuses it
        if not status.runner_alive:
            return None
        waiting = frozenset(name for name, state in status.node_states().items() if state not in DONE_STATES)
        return Live(waiting, driver=f"DAGMan job {record.latest.cluster}.0")


def launched(submission: Submission) -> Launched:
    """What a submission started (or a dry run would): the DAGMan job and where it went."""
    prepared, cluster = submission.prepared, submission.cluster
    job = "" if cluster is None else f"{cluster}.0"
    facts: dict[str, Any] = {
        "dagman_job": job or None,
        "schedd": prepared.record.schedd,
        "pool": prepared.record.pool,
        "dag": str(prepared.dag),
        "rescue": submission.rescue,
        "dry_run": cluster is None,
    }
    if cluster is None:
        facts["description"] = submission.description
    return Launched(
        job, facts, driver=f"DAGMan job {job}" if job else "", target=prepared.target.describe(),
        rescue=submission.rescue, preview=submission.description if cluster is None else None, source=prepared.dag,
    )  # fmt: skip
