"""The search scheduler: keeps `parallel` trials running per region until the budget is spent.

Each round it reads every in-flight trial's run directory (scheduler_observe.py) and records those
that ended, in whatever order they end; then, per region, asks the optimiser for as many points as
there are free slots (conditioning on the points still pending), and submits each as a trial through
the chosen engine. With `batch` (synchronous batches, as GPyOpt runs and Ray Tune's
ConcurrencyLimiter(batch=True) offers) a region gets new points only once none of its trials is in
flight: each batch of `parallel` is chosen knowing every earlier result, which on a fixed budget of
evaluations finds better points than filling each slot as it frees (benchmarks/search.py, information
lag), at the price of slots left idle while a batch's slowest trial runs. With `serial_tail: N` the
last N trials of a region's budget run one at a time, each suggested once every other trial of the
region has ended (see _fill for what that buys). Per-region searches are
independent optimisations run side by side in this one process. Failed trials (a failed node, no
objective, a vanished job, a passed deadline) count against the budget and tell the optimiser that point
failed. Ctrl-C or SIGTERM cancels the running trials.

Crash safety (kill -9 at any moment, then run the same command again):
- a trial row (params, run id, state submitting) is committed before the engine is asked to run it,
  so a restarted scheduler knows every trial that may have been submitted and never suggests it again;
  the rows of one suggestion's points are committed together, so a batch survives a kill whole;
- a trial's run is prepared, then marked as the trial's own (trial.json: the search's uid, the
  trial's region, number and exact params; ownership.py), then started. A run directory of the
  trial's name that is not provably its own (another database's search of this name, an older
  search) is never adopted or started: the trial gets a fresh run id;
- on restart, a submitting trial whose run directory does not exist was never submitted: it is
  submitted now, with its recorded params and run id. One whose own run directory exists is adopted;
  if that run was prepared but nothing ever started it, it is started now (the run directory's lock
  and journal make a second start of one run harmless: a second runner finds the lock taken or the
  work done);
- a trial whose submission fails is ended as cancelled (not counted, no result) before the error is
  reported: none is left `submitting`;
- results are read from the run directories, which outlive the scheduler (the local engine's runners
  run detached), and recorded by one guarded UPDATE, so a trial that ended while the scheduler was
  down is recorded on restart and none is recorded twice.
- early stopping (early_stopping.py) records its decision to stop a trial (state stopping, with the
  trial's last value) before it cancels the trial's run, then records it stopped; a trial found
  stopping on restart is cancelled again (harmless when its run is gone) and recorded stopped, so it
  is never restarted and counted once. Its last value is given to the optimiser as its result.
Only one scheduler may work on a search at a time (an flock beside the database, released by the
kernel when the process dies however it dies). The lock file is named after the database's real path,
so a symlink to the database, or to a directory above it, leads to the same lock.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagflow.engines.base import Engine
from dagflow.engines.registry import (
    engine_capabilities,
    engine_feature,
    engine_names,
    engine_provides,
    read_run_status,
    run_session,
)
from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout
from dagflow.run.session import Work
from dagflow.search import loss, make_optimizer
from dagflow.search.best import Best, best_text, reported_best
from dagflow.search.best import observations as _observations
from dagflow.search.early_stopping import EarlyStopper, StopDecision
from dagflow.search.optimizer import Optimizer
from dagflow.search.ownership import (
    TRIAL_FILE,
    fresh_run_id,
    identity,
    owns,
    record_owner,
)
from dagflow.search.progress import StreamedFile
from dagflow.search.scheduler_engines import EngineSettings, make_engine
from dagflow.search.scheduler_observe import (
    CUT_SHORT,
    FAILED_RUN,
    NOT_STARTED,
    PENDING,
    SUCCEEDED,
    VANISHED,
    never_started,
    observe_run,
    runner_pid,
)
from dagflow.search.store import (
    CANCELLED,
    COUNTED,
    FAILED,
    IN_FLIGHT,
    RUNNING,
    STOPPED,
    STOPPING,
    SUBMITTING,
    SearchRecord,
    SearchStore,
    SearchStoreError,
    Trial,
    nan_objective,
)
from dagflow.search.store import SUCCEEDED as TRIAL_SUCCEEDED
from dagflow.search.trial_threads import TrialThreads
from dagflow.search.trials import TrialError, TrialSource, config_of, fingerprint, noise_models
from dagflow.search.wakeup import Wakeup
from dagflow.text import inert

EXIT_DONE = 0
EXIT_NO_RESULT = 1  # some region's search ended without one successful (and feasible) trial
# stopped: the last max_identical_failures trials failed with one error, or one showed no trial can run
EXIT_REPEATED_FAILURE = 3
EXIT_STOPPED = 130

DEFAULT_TRIAL_TIMEOUT_S = 7 * 24 * 3600.0
DEFAULT_START_GRACE_S = 120.0
# Fault injection for the crash tests: seconds to wait between recording a stop decision and cancelling
# the trial's run, so a test can kill -9 the scheduler inside that window.
STOP_PAUSE_ENV = "DAGFLOW_SEARCH_STOP_PAUSE_S"


class EngineCannotStreamError(DagflowError):
    """early_stopping with an engine that cannot show metric lines while a trial runs."""


class SearchBusyError(DagflowError):
    pass


class SearchStorageError(DagflowError):
    """A trial's run stopped for a full disk: the search stops, its trials in flight stay so and resume."""


@dataclass(slots=True)
class SchedulerOptions:
    engine: str = "local"
    runs_dir: Path = DEFAULT_RUNS_DIR
    name: str | None = None  # the search's name [default: the pipeline's or experiment's name]
    budget: int | None = None  # trials per region [default: the search block's]
    parallel: int | None = None  # trials running at once per region [default: the search block's]
    batch: bool | None = None  # synchronous batches of `parallel` trials [default: the search block's]
    serial_tail: int | None = None  # the last trials that run one at a time [default: the search block's]
    seed: int | None = None  # for a new search [default: random, then kept in the database]
    poll_s: float = 1.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    start_grace_s: float = DEFAULT_START_GRACE_S
    jobs: int | None = None  # local engine: nodes of one trial at once
    gpus: str | None = None  # local engine: GPU devices, e.g. "0,1" [default: nvidia-smi's]
    # Stop the search after this many trials in a row failed with the same error (0: never): a broken
    # main file or pipeline fails every trial alike, and the rest of the budget would only repeat it.
    max_identical_failures: int = 3


def params_text(params: Mapping[str, Any]) -> str:
    def one(value: Any) -> str:
        if isinstance(value, list):
            return ",".join(one(item) for item in value)
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    return " ".join(f"{name}={one(value)}" for name, value in params.items())


def say_line(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {inert(text)}", flush=True)  # a trial's error can quote its files


def search_lock_path(db: Path, name: str) -> Path:
    real = Path(os.path.realpath(db))  # the file itself, whichever path reached it
    return real.with_name(f"{real.name}.{name}.lock")


@contextmanager
def search_lock(db: Path, name: str) -> Iterator[None]:
    path = search_lock_path(db, name)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise SearchStoreError(f"{path}: cannot create the lock file ({error.strerror})") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise SearchBusyError(f"search {name!r} is being run by another scheduler (pid {holder})") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


class Scheduler:
    def __init__(
        self,
        source: TrialSource,
        store: SearchStore,
        options: SchedulerOptions,
        say: Callable[[str], None] = say_line,
        engine: Engine | None = None,
    ) -> None:
        self.source = source
        self.store = store
        self.options = options
        self.say = say
        self.name = options.name or source.name
        self.budget = options.budget or source.budget
        self.parallel = options.parallel or source.parallel
        self.batch = source.batch if options.batch is None else options.batch
        self.serial_tail = min(self.budget, source.serial_tail if options.serial_tail is None else options.serial_tail)
        self.runs_dir = Path(options.runs_dir).absolute()
        self.likelihood, self.constraint_likelihoods = noise_models(source)
        self.engine = engine or make_engine(options.engine, EngineSettings(self.runs_dir, options.jobs, options.gpus))
        self.session = run_session(self.engine)  # a trial starts and continues past the live-run rule, as any run
        self._stop = threading.Event()
        self._wakeup = Wakeup()
        # Where the engine can run a trial's run on a thread of this process (the local engine), it does:
        # a trial then pays no process start-up, and its end wakes the scheduler directly.
        self._threads = TrialThreads(self._wakeup.wake)
        here = engine is None and options.engine and engine_provides(options.engine, "launch_here")
        self._launch_here = engine_feature(options.engine, "launch_here") if here else None
        self._exhausted: set[str] = set()
        self._optimizers: dict[str, Optimizer] = {}
        self._uid = ""
        self._failures: list[tuple[str, str]] = []  # (trial label, error) of the failures in a row, latest last
        self._unrunnable: str | None = None  # the label of a failed trial that showed no trial can succeed
        # the engine's `progress_files` feature, where it has one (set by _early_stopper)
        self._streamed_files: Callable[[Path, Plan, list[Path]], list[Path | StreamedFile]] | None = None
        self._stopper = self._early_stopper()
        self._checked: set[tuple[str, int]] = set()  # (region, number) of trials whose params fit the space
        self._stop_pause_s = float(os.environ.get(STOP_PAUSE_ENV) or 0)

    # -- the loop ------------------------------------------------------------------------------------

    def run(self) -> int:
        with search_lock(self.store.path, self.name), self._signals():
            record = self.store.open_search(
                self.name, self.source.kind, self.source.source, fingerprint(self.source), config_of(self.source),
                self._seed(), self.budget, self.parallel,
            )  # fmt: skip
            self._uid = record.uid
            self._optimizers = {
                region: make_optimizer(
                    self.source.space,
                    self.source.optimizer,
                    seed=record.seed + index,
                    likelihood=self.likelihood,
                    constraints=self.constraint_likelihoods,
                    budget=self.budget,
                    failures_spend_budget=self.source.counts_failures,
                )
                for index, region in enumerate(self.source.regions)
            }
            self._header(record)
            self._recover()
            while not self._stop.is_set():
                for region in self.source.regions:
                    self._collect(region)
                if self._stop.is_set():
                    break
                if self._unrunnable is not None:
                    return self._stop_unrunnable()
                if self._repeating():
                    return self._stop_repeating()
                for region in self.source.regions:
                    self._fill(region)
                if all(self._finished(region) for region in self.source.regions):
                    self._threads.join()  # the last runners shutting down
                    return self._summary()
                self._wait()
            self._cancel_in_flight()
            return EXIT_STOPPED

    def stop(self) -> None:
        if self._stop.is_set():  # asked again (a second Ctrl-C): the trials' runners kill their nodes at once
            self._threads.stop_all()
        self._stop.set()
        self._wakeup.wake()

    def _wait(self) -> None:
        """Until a running trial's runner ends (no poll period to wait out), a stop, or the poll period. A
        runner on a thread of this process wakes the wait itself; a detached one's process is watched."""
        running = [self.runs_dir / trial.run_id for trial in self._trials() if trial.state == RUNNING]
        self._wakeup.wait([run_dir for run_dir in running if not self._threads.ours(run_dir)], self.options.poll_s)

    def _early_stopper(self) -> EarlyStopper | None:
        spec = self.source.early_stopping
        if spec is None:
            return None
        if self.options.engine and not engine_capabilities(self.options.engine).streams_progress:
            raise EngineCannotStreamError(
                f"early_stopping: the {self.options.engine} engine cannot show a trial's metric lines while it "
                "runs (they come back when the job ends), so no trial could be stopped early; remove "
                "early_stopping, or run the search with an engine that streams them (--engine "
                + ", ".join(name for name in engine_names() if engine_capabilities(name).streams_progress)
                + ")"
            )
        goal = self.source.goal
        # An engine whose jobs share no filesystem with this process says where their lines arrive instead
        # (condor: the node's streamed stderr); the others' jobs write the metrics files read here.
        engine = self.options.engine
        if engine and engine_provides(engine, "progress_files"):
            self._streamed_files = engine_feature(engine, "progress_files")
        return EarlyStopper(spec, self.source.metric, lambda value: loss(value, goal), self._progress_files)

    def _progress_files(self, run_id: str) -> list[Path | StreamedFile]:
        try:
            run_dir = self.runs_dir / run_id
            plan = RunLayout.from_run_dir(run_dir).load_plan()
            files = self.source.progress_files(plan)
            if self._streamed_files is not None:
                return list(self._streamed_files(run_dir, plan, files))
            return list(files)
        except (DagflowError, OSError):
            return []

    def _seed(self) -> int:
        existing = self.store.search(self.name)
        if existing is not None:
            return existing.seed
        return self.options.seed if self.options.seed is not None else secrets.randbelow(2**31)

    @contextmanager
    def _signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            signal.signal(sig, lambda *_: self.stop())
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _header(self, record: SearchRecord) -> None:
        regions = [region for region in self.source.regions if region]
        per = f" per region ({', '.join(regions)})" if regions else ""
        done = self._counted(self._trials())
        self.say(
            f"search {self.name}: {self.source.goal} {self.source.metric}, budget {self.budget}{per}, "
            f"parallel {self.parallel}{' (synchronous batches)' if self.batch else ''}"
            f"{f', the last {self.serial_tail} one at a time' if self.serial_tail else ''}, "
            f"optimiser {self.source.optimizer}, engine {self.options.engine}, "
            f"seed {record.seed}; {done} trial(s) recorded in {self.store.path}"
        )
        for note in self.source.notes():
            self.say(note)

    def _trials(self, region: str | None = None) -> list[Trial]:
        """The search's trials, each one's params checked once against the space: params from a damaged
        database must reach neither the optimiser nor a trial's command."""
        trials = self.store.trials(self.name, region)
        for trial in trials:
            if (trial.region, trial.number) not in self._checked:
                self._check_params(trial)
                self._checked.add((trial.region, trial.number))
        return trials

    def _check_params(self, trial: Trial) -> None:
        space = self.source.space
        problems = []
        try:
            space.encode(trial.params)
        except (ValueError, TypeError) as error:
            problems.append(str(error))
        unknown = sorted(set(trial.params) - set(space.names))
        if unknown:
            problems.append(f"unknown parameter(s): {', '.join(unknown)}")
        if problems:
            shown = json.dumps(trial.params)
            why = "; ".join(problems)
            raise self.store.damaged(trial, f"params {shown} is not a point of the search's space ({why})")

    # -- submitting ----------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Trials a killed scheduler left in `submitting`: submit, adopt or start each exactly once."""
        in_flight = [trial for trial in self._trials() if trial.state in IN_FLIGHT]
        other = sorted({trial.engine for trial in in_flight} - {self.options.engine})
        if other:
            raise SearchBusyError(
                f"search {self.name!r} has trials in flight on the {', '.join(other)} engine; "
                f"continue it with --engine {other[0]}"
            )
        for trial in in_flight:
            if trial.state == STOPPING:
                self._finish_stop(trial)
                continue
            if trial.state == RUNNING and self._stopper is not None:
                self._stopper.resume(trial.run_id)
            if trial.state == RUNNING:
                self._resume_cut_short(trial)
            if trial.state != SUBMITTING:
                continue
            trial = self._own_run(trial)
            run_dir = self.runs_dir / trial.run_id
            if not RunLayout.from_run_dir(run_dir).exists():
                self._submit(trial, "resubmitted")
            elif never_started(run_dir):
                self._submit(trial, "started")
            else:
                pid = runner_pid(run_dir)
                self.store.mark_submitted(trial, str(pid) if pid is not None else None)
                self.say(f"[{trial.label}] adopted run {trial.run_id}")
                self._resume_cut_short(trial)  # its runner died with the scheduler that started it

    def _resume_cut_short(self, trial: Trial) -> None:
        """A running trial whose run was cut short while no scheduler could record it (the disk was full, the
        machine went down, its runner was a thread of a scheduler that died): its run is resumed, keeping its
        finished nodes, instead of counted as failed. So is one such a runner never started."""
        run_dir = self.runs_dir / trial.run_id
        observed = observe_run(run_dir, trial.submitted or trial.created, self.options.start_grace_s)
        unstarted = self._launch_here is not None and observed.state in (PENDING, NOT_STARTED)
        if observed.state == CUT_SHORT or (unstarted and never_started(run_dir)):
            layout = RunLayout.from_run_dir(run_dir)
            handle = self._launch(layout, self.session.proceed(layout))
            why = observed.why or "its runner had not started it"
            self.say(f"[{trial.label}] resumed run {trial.run_id} (job {handle}): {why}")

    def _fill(self, region: str) -> None:
        if region in self._exhausted:
            return
        trials = self._trials(region)
        in_flight = [trial for trial in trials if trial.state in IN_FLIGHT]
        counted = self._counted(trials)
        if self.batch and in_flight:
            return  # the next batch is chosen knowing every result of this one
        # The tail: no trial of it starts while another runs, so each of its points is chosen knowing
        # every earlier result, and the gp optimiser's final refinement steps (gp_ei.FINAL_FRACTION) each
        # build on the one before. HIPS's distributed Branin (4 in flight, its jobs' random sleeps of
        # 0-29 s, 25 evaluations, 3 orders of 24 seeds, in process): best within 1% of the minimum on
        # 57/72 runs with no tail, 63/72 with a tail of 1, 65/72 with 2 or 3, 68/72 with 4 or 6; the
        # simulated wall time 109 s, then 120 s (tail 1), 131 s (2), 143 s (3), 154 s (4). Off by default:
        # with hour-long trials those idle slots are hours.
        tail_from = self.budget - self.serial_tail
        if self.serial_tail and counted >= tail_from:
            if in_flight:
                return
            wanted = min(1, self.budget - counted)
        else:
            wanted = min(self.parallel - len(in_flight), tail_from - counted)
        if wanted <= 0 or self._failed_out(trials):
            return
        observations = _observations(trials)
        # The GP and Optuna optimisers cap BLAS threads around each suggestion themselves (threads.py).
        points = self._optimizers[region].suggest(wanted, observations, [t.params for t in in_flight])
        if not points:
            self._exhausted.add(region)
            where = f" for {region}" if region else ""
            self.say(f"search space exhausted{where}: every point has been tried")
        # Recorded whole before any is submitted: a kill part-way leaves the rest submitting, and the restart
        # submits them, so a batch is never cut short (nor a stop's cancel left out).
        trials = self.store.add_trials(self.name, region, points, self.options.engine, self.options.trial_timeout_s)
        for trial in trials:
            if self._stop.is_set():
                return
            self._submit(trial, "submitted")

    def _own_run(self, trial: Trial) -> Trial:
        """The trial, with a run id whose directory is absent or provably this trial's own."""
        while True:
            run_dir = self.runs_dir / trial.run_id
            # No plan.json: not a run (none yet, or a prepare cut short by a kill), so the name is free.
            prepared = RunLayout(self.runs_dir, trial.run_id).exists()
            if not prepared or owns(run_dir, identity(self._uid, trial)) or self._claim_unmarked(trial):
                return trial
            fresh = fresh_run_id(trial)
            self.say(f"[{trial.label}] run {trial.run_id} exists but is not this trial's own; using run {fresh}")
            trial = self.store.set_run_id(trial, fresh)

    def _claim_unmarked(self, trial: Trial) -> bool:
        """A run prepared for this trial by a scheduler killed before it wrote trial.json: it has none, and
        its stored plan is exactly the plan this trial makes (same params, number and run id), so what it
        holds is this trial's work. Claimed by writing trial.json now."""
        run_dir = self.runs_dir / trial.run_id
        if (run_dir / TRIAL_FILE).exists():
            return False
        try:
            stored = Plan.from_json((run_dir / "plan.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return False
        expected = self.source.plan(trial.region, trial.number, trial.params, trial.run_id)
        expected = dataclasses.replace(expected, workdir=os.path.abspath(expected.workdir))
        stored = dataclasses.replace(stored, workdir=os.path.abspath(stored.workdir))
        return stored.to_json() == expected.to_json() and record_owner(run_dir, identity(self._uid, trial))

    def _submit(self, trial: Trial, verb: str) -> None:
        trial = self._own_run(trial)
        run_dir = self.runs_dir / trial.run_id
        try:
            plan = self.source.plan(trial.region, trial.number, trial.params, trial.run_id)
            layout = RunLayout(self.runs_dir, trial.run_id)
            if not layout.exists():
                layout, work = self.session.create(plan, self.runs_dir)  # creating never makes it `latest`
                if not record_owner(run_dir, identity(self._uid, trial)):
                    raise SearchBusyError(f"run {trial.run_id} was claimed by another search while it was prepared")
            else:  # prepared by a scheduler that was stopped before it started the run
                self.session.admit(plan, self.runs_dir)
                work = Work(plan, tuple(plan.nodes))
            handle = self._launch(layout, work)
        except DagflowError as error:
            self._end(trial, CANCELLED, error=f"could not be submitted: {error}")
            raise
        self.store.mark_submitted(trial, handle)
        self.say(f"[{trial.label}] {verb} {params_text(trial.params)} (run {trial.run_id}, job {handle})")

    def _launch(self, layout: RunLayout, work: Work) -> str:
        """Start a trial's work: on a thread of this process where the engine runs it so, else by its launch."""
        if self._launch_here is None:
            return self.session.launch(layout, work).handle
        launch_here = self._launch_here
        self._threads.start(self.runs_dir / layout.run_id, lambda told: launch_here(self.engine, layout, work, told))
        self.session.started(layout)
        return str(os.getpid())

    # -- collecting ----------------------------------------------------------------------------------

    def _collect(self, region: str) -> None:
        for trial in self._trials(region):
            if trial.state != RUNNING:
                continue
            run_dir = self.runs_dir / trial.run_id
            if time.time() > trial.deadline:
                self._cancel(run_dir)
                limit = trial.deadline - trial.created
                self._end(trial, FAILED, error=f"deadline: still not finished after {limit:.0f} s; cancelled")
                continue
            threads = self._threads
            if threads.running(run_dir):
                continue
            # a runner of ours that has ended leaves nothing to wait for, and says what stopped it itself
            since = 0.0 if threads.ours(run_dir) else trial.submitted or trial.created
            settled = threads.finished(run_dir)
            observed = observe_run(run_dir, since, self.options.start_grace_s, threads.error(run_dir), settled)
            if observed.state == SUCCEEDED:
                self._succeeded(trial, run_dir)
            elif observed.state == FAILED_RUN:
                self._end(trial, FAILED, error=observed.why)
            elif observed.for_storage:  # the same disk holds the other trials' runs: none can go on
                raise SearchStorageError(
                    f"trial {trial.label}'s run {trial.run_id} stopped: {observed.why}; free some space, then run "
                    "the same command again: the trials in flight resume"
                )
            elif observed.state in (VANISHED, NOT_STARTED, CUT_SHORT):
                self._end(trial, FAILED, error=f"vanished: {observed.why}")
        if self._stopper is not None:
            self._early_stop(region)

    def _early_stop(self, region: str) -> None:
        """Stop the running trials the early-stopping rule rules out, each through the engine's cancel."""
        assert self._stopper is not None
        trials = self._trials(region)
        running = {trial.run_id: trial for trial in trials if trial.state == RUNNING}
        ended = [trial.run_id for trial in trials if trial.state in (TRIAL_SUCCEEDED, STOPPED, STOPPING)]
        for run_id, decision in self._stopper.decide(list(running), ended).items():
            if self._stop.is_set():
                return
            self._stop_early(running[run_id], decision)

    def _stop_early(self, trial: Trial, decision: StopDecision) -> None:
        trial_loss = loss(decision.value, self.source.goal)
        if not self.store.mark_stopping(trial, decision.value, trial_loss, decision.step, decision.reason):
            return  # it ended meanwhile
        if self._stop_pause_s:
            time.sleep(self._stop_pause_s)
        self._finish_stop(self.store.trial(trial.search, trial.region, trial.number))

    def _finish_stop(self, trial: Trial) -> None:
        """Cancel a trial recorded as stopping, then record it stopped (also what a restart does). A trial whose
        run had completed every node before the cancel (the lines the decision read arrived late, as streamed
        ones may) is recorded as it ended instead: a finished trial is never labelled stopped."""
        run_dir = self.runs_dir / trial.run_id
        self._cancel(run_dir)
        if self._ran_to_end(run_dir) and self.store.unstop(trial):
            self._succeeded(self.store.trial(trial.search, trial.region, trial.number), run_dir)
            return
        if self.store.finish_stopping(trial):
            self._failures.clear()
            value = f"{trial.value:.6g}" if trial.value is not None else "?"
            self.say(f"[{trial.label}] stopped at step {trial.step} {self.source.metric}={value}: {trial.error}")

    @staticmethod
    def _ran_to_end(run_dir: Path) -> bool:
        """Whether every node of the run had completed, as its engine's record says."""
        try:
            status = read_run_status(RunLayout.from_run_dir(run_dir))
        except (DagflowError, OSError):
            return False
        return bool(status.plan.nodes) and set(status.plan.nodes) <= status.journal.done()

    def _succeeded(self, trial: Trial, run_dir: Path) -> None:
        try:
            plan = RunLayout.from_run_dir(run_dir).load_plan()
            value = self.source.objective(plan)
            outputs = self.source.outputs(plan)
        except (TrialError, DagflowError) as error:
            self._end(trial, FAILED, error=f"no objective: {error}")
            return
        # A NaN objective (a Spearmint job's, spearmint_job.py) is HIPS's infeasible point: the trial completed
        # and is recorded without a value (store.nan_objective)
        self._end(trial, TRIAL_SUCCEEDED, value=None if math.isnan(value) else value, outputs=outputs)

    def _end(
        self,
        trial: Trial,
        state: str,
        value: float | None = None,
        error: str | None = None,
        outputs: dict[str, float] | None = None,
    ) -> None:
        trial_loss = loss(value, self.source.goal) if value is not None else None
        cause = ""
        if state == FAILED:
            error, cause = self._own_error(trial, error)
        if not self.store.finish(trial, state, value, trial_loss, error, outputs):
            return
        try:
            self.source.observed(self._trials(trial.region), lambda: self._reported(trial.region))
        except OSError as error:  # a full disk: the search itself goes on, its state is in the database
            self.say(f"could not write the search's records: {error}")
        if state == TRIAL_SUCCEEDED:
            self._failures.clear()
            best = self._best(trial.region)
            tail = f" (best {best.value:.6g}, {best.label})" if best is not None else ""
            shown = " ".join(f"{name}={number:.6g}" for name, number in (outputs or {}).items())
            what = (
                f"{self.source.metric}={value:.6g}"
                if value is not None
                else f"{self.source.metric}=nan: infeasible (a NaN objective, as HIPS Spearmint has it)"
            )
            self.say(f"[{trial.label}] succeeded {what}{' ' + shown if shown else ''}{tail}")
        elif state == FAILED:
            self._failed(trial, error or "", cause)
        else:
            self.say(f"[{trial.label}] {state}: {error}")

    def _own_error(self, trial: Trial, error: str | None) -> tuple[str | None, str]:
        """The error to record (with the trial's own account of its failure, a Spearmint job's traceback,
        where it left one) and its cause: what two failures alike share, whatever trial or job failed."""
        try:
            plan = RunLayout.from_run_dir(self.runs_dir / trial.run_id).load_plan()
            own = self.source.failure(plan)
            if self.source.unrunnable(plan):
                self._unrunnable = trial.label
        except (DagflowError, OSError):
            own = None
        if not own:
            return error, (error or "").replace(trial.run_id, "<run>")
        if not error:
            return own, own
        # the run's reason ends with the job's last stderr line, which is the traceback's last line
        shown = error.removesuffix(": " + own.splitlines()[-1].strip())
        return f"{shown}{chr(10) if chr(10) in own else ': '}{own}", own

    def _failed(self, trial: Trial, error: str, key: str) -> None:
        """Report a failure; one with the previous one's cause is not printed again."""
        same = bool(self._failures) and self._failures[-1][1] == key
        if not same:
            self._failures.clear()
        self._failures.append((trial.label, key))
        if same:
            self.say(f"[{trial.label}] failed: the same error as {self._failures[0][0]}")
        else:
            self.say(f"[{trial.label}] failed: {error}")

    def _repeating(self) -> bool:
        limit = self.options.max_identical_failures
        return limit > 0 and len(self._failures) >= limit

    def _stop_repeating(self) -> int:
        labels = ", ".join(label for label, _ in self._failures)
        self._cancel_in_flight(quiet=True)
        self.say(
            f"search {self.name} stopped: {len(self._failures)} trials in a row ({labels}) failed with the same "
            f"error, shown above (--max-identical-failures {self.options.max_identical_failures}); the rest of "
            "the budget is not spent. Fix the error and run the same command again to continue the search."
        )
        return EXIT_REPEATED_FAILURE

    def _stop_unrunnable(self) -> int:
        self._cancel_in_flight(quiet=True)
        self.say(
            f"search {self.name} stopped at its first failure ({self._unrunnable}): no trial can run until the "
            "error shown above is fixed; the rest of the budget is not spent. Run the same command again then."
        )
        return EXIT_REPEATED_FAILURE

    def _best(self, region: str) -> Trial | None:
        """The feasible trial with the lowest draw so far (the per-trial lines' running best)."""
        best = reported_best(self._trials(region), None, None, self.source.goal)
        return None if best is None else best.trial

    def _reported(self, region: str) -> Trial | None:
        """The trial reported as the region's best (best.py: the one function every report uses)."""
        best = self._reported_best(region)
        return None if best is None else best.trial

    def _reported_best(self, region: str) -> Best | None:
        return reported_best(self._trials(region), self.likelihood, self.source.space, self.source.goal)

    def _finished(self, region: str) -> bool:
        trials = self._trials(region)
        if any(trial.state in IN_FLIGHT for trial in trials):
            return False
        return region in self._exhausted or self._counted(trials) >= self.budget or self._failed_out(trials)

    def _counted(self, trials: list[Trial]) -> int:
        """Trials spent of the budget: failed ones too, unless the source leaves them out (Spearmint's way)."""
        counted = COUNTED if self.source.counts_failures else tuple(s for s in COUNTED if s != FAILED)
        return sum(1 for trial in trials if trial.state in counted)

    def _failed_out(self, trials: list[Trial]) -> bool:
        """Where failures are not counted, a search stops once as many trials failed as its budget: their
        causes differ (or --max-identical-failures would have stopped it), but it would never end."""
        return not self.source.counts_failures and sum(1 for t in trials if t.state == FAILED) >= self.budget

    # -- stopping ------------------------------------------------------------------------------------

    def _cancel(self, run_dir: Path) -> None:
        if self._threads.stop(run_dir):
            return
        try:
            self.engine.cancel(run_dir)
        except (DagflowError, OSError) as error:
            self.say(f"could not cancel run {run_dir.name}: {error}")

    def _cancel_in_flight(self, quiet: bool = False) -> None:
        for trial in self._trials():
            if trial.state == STOPPING:
                self._finish_stop(trial)
            elif trial.state in IN_FLIGHT:
                self._cancel(self.runs_dir / trial.run_id)
                self._end(trial, CANCELLED, error="stopped with the scheduler")
        self._threads.join()  # the runners of this process stop their nodes before it exits
        if not quiet:
            self.say(f"search {self.name} stopped; run the same command again to continue it")

    def _summary(self) -> int:
        code = EXIT_DONE
        for region in self.source.regions:
            reported = self._reported_best(region)
            where = f" {region}" if region else ""
            trials = self._trials(region)
            if self._failed_out(trials):
                failed = sum(1 for trial in trials if trial.state == FAILED)
                self.say(f"search {self.name}{where}: {failed} jobs failed (as many as the budget); none more started")
            if reported is None:
                nans = sum(1 for trial in trials if nan_objective(trial))
                feasible = " satisfied the constraints" if self.source.constraints else " succeeded"
                feasible = f" was feasible ({nans} had a NaN objective)" if nans else feasible
                self.say(f"search {self.name}{where} done: no trial{feasible}")
                code = EXIT_NO_RESULT
            else:
                best = reported.trial
                how = " (lowest posterior mean: the objective is noisy)" if self.likelihood == "GAUSSIAN" else ""
                shown = best_text(self.source.metric, best.value, best.number, reported.posterior_mean)
                where_best = f" {best.region}" if best.region else ""
                self.say(f"search {self.name}{where} done: best {shown}{where_best} {params_text(best.params)}{how}")
        return code

