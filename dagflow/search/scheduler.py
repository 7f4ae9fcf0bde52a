"""The search scheduler: keeps `parallel` trials running per region until the budget is spent.

Each round it reads every in-flight trial's run directory (scheduler_observe.py) and records those
that ended, in whatever order they end; then, per region, asks the optimiser for as many points as
there are free slots (conditioning on the points still pending), and submits each as a trial through
the chosen engine. Per-region searches are independent optimisations run side by side in this one
process. Failed trials (a failed node, no objective, a vanished job, a passed deadline) count against
the budget and tell the optimiser that point failed. Ctrl-C or SIGTERM cancels the running trials.

Crash safety (kill -9 at any moment, then run the same command again):
- a trial row (params, run id, state submitting) is committed before the engine is asked to run it,
  so a restarted scheduler knows every trial that may have been submitted and never suggests it again;
- on restart, a submitting trial whose run directory does not exist was never submitted: it is
  submitted now, with its recorded params and run id. One whose run directory exists is adopted; if
  that run was prepared but nothing ever started it, it is started now (the run directory's lock and
  journal make a second start of one run harmless: a second runner finds the lock taken or the work
  done);
- results are read from the run directories, which outlive the scheduler (the local engine's runners
  run detached), and recorded by one guarded UPDATE, so a trial that ended while the scheduler was
  down is recorded on restart and none is recorded twice.
Only one scheduler may work on a search at a time (an flock beside the database, released by the
kernel when the process dies however it dies).
"""

from __future__ import annotations

import fcntl
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
from dagflow.errors import DagflowError
from dagflow.run.layout import DEFAULT_RUNS_DIR, RunLayout
from dagflow.search import Observation, loss, make_optimizer
from dagflow.search.optimizer import Optimizer
from dagflow.search.scheduler_engines import EngineSettings, make_engine
from dagflow.search.scheduler_observe import (
    FAILED_RUN,
    NOT_STARTED,
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
    SUBMITTING,
    SearchRecord,
    SearchStore,
    Trial,
    best_trial,
)
from dagflow.search.store import SUCCEEDED as TRIAL_SUCCEEDED
from dagflow.search.trials import TrialError, TrialSource, config_of, fingerprint

EXIT_DONE = 0
EXIT_NO_RESULT = 1  # some region's search ended without one successful trial
EXIT_STOPPED = 130

DEFAULT_TRIAL_TIMEOUT_S = 7 * 24 * 3600.0
DEFAULT_START_GRACE_S = 120.0


class SearchBusyError(DagflowError):
    pass


@dataclass(slots=True)
class SchedulerOptions:
    engine: str = "local"
    runs_dir: Path = DEFAULT_RUNS_DIR
    name: str | None = None  # the search's name [default: the pipeline's or experiment's name]
    budget: int | None = None  # trials per region [default: the search block's]
    parallel: int | None = None  # trials running at once per region [default: the search block's]
    seed: int | None = None  # for a new search [default: random, then kept in the database]
    poll_s: float = 1.0
    trial_timeout_s: float = DEFAULT_TRIAL_TIMEOUT_S
    start_grace_s: float = DEFAULT_START_GRACE_S
    jobs: int | None = None  # local engine: nodes of one trial at once


def params_text(params: Mapping[str, Any]) -> str:
    def one(value: Any) -> str:
        if isinstance(value, list):
            return ",".join(one(item) for item in value)
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    return " ".join(f"{name}={one(value)}" for name, value in params.items())


def say_line(text: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {text}", flush=True)


@contextmanager
def search_lock(db: Path, name: str) -> Iterator[None]:
    path = db.with_name(f"{db.name}.{name}.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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
        self.runs_dir = Path(options.runs_dir).absolute()
        self.engine = engine or make_engine(options.engine, EngineSettings(self.runs_dir, options.jobs))
        self._stop = threading.Event()
        self._exhausted: set[str] = set()
        self._optimizers: dict[str, Optimizer] = {}

    # -- the loop ------------------------------------------------------------------------------------

    def run(self) -> int:
        with search_lock(self.store.path, self.name), self._signals():
            record = self.store.open_search(
                self.name, self.source.kind, self.source.source, fingerprint(self.source), config_of(self.source),
                self._seed(), self.budget, self.parallel,
            )  # fmt: skip
            self._optimizers = {
                region: make_optimizer(self.source.space, self.source.optimizer, seed=record.seed + index)
                for index, region in enumerate(self.source.regions)
            }
            self._header(record)
            self._recover()
            while not self._stop.is_set():
                for region in self.source.regions:
                    self._collect(region)
                if self._stop.is_set():
                    break
                for region in self.source.regions:
                    self._fill(region)
                if all(self._finished(region) for region in self.source.regions):
                    return self._summary()
                self._stop.wait(self.options.poll_s)
            self._cancel_in_flight()
            return EXIT_STOPPED

    def stop(self) -> None:
        self._stop.set()

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
            signal.signal(sig, lambda *_: self._stop.set())
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _header(self, record: SearchRecord) -> None:
        regions = [region for region in self.source.regions if region]
        per = f" per region ({', '.join(regions)})" if regions else ""
        done = sum(1 for trial in self.store.trials(self.name) if trial.state in COUNTED)
        self.say(
            f"search {self.name}: {self.source.goal} {self.source.metric}, budget {self.budget}{per}, "
            f"parallel {self.parallel}, optimiser {self.source.optimizer}, engine {self.options.engine}, "
            f"seed {record.seed}; {done} trial(s) recorded in {self.store.path}"
        )

    # -- submitting ----------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Trials a killed scheduler left in `submitting`: submit, adopt or start each exactly once."""
        in_flight = [trial for trial in self.store.trials(self.name) if trial.state in IN_FLIGHT]
        other = sorted({trial.engine for trial in in_flight} - {self.options.engine})
        if other:
            raise SearchBusyError(
                f"search {self.name!r} has trials in flight on the {', '.join(other)} engine; "
                f"continue it with --engine {other[0]}"
            )
        for trial in in_flight:
            if trial.state != SUBMITTING:
                continue
            run_dir = self.runs_dir / trial.run_id
            if not RunLayout.from_run_dir(run_dir).exists():
                self._submit(trial, "resubmitted")
            elif never_started(run_dir):
                self._submit(trial, "started")
            else:
                pid = runner_pid(run_dir)
                self.store.mark_submitted(trial, str(pid) if pid is not None else None)
                self.say(f"[{trial.label}] adopted run {trial.run_id}")

    def _fill(self, region: str) -> None:
        if region in self._exhausted:
            return
        trials = self.store.trials(self.name, region)
        in_flight = [trial for trial in trials if trial.state in IN_FLIGHT]
        counted = sum(1 for trial in trials if trial.state in COUNTED)
        wanted = min(self.parallel - len(in_flight), self.budget - counted)
        if wanted <= 0:
            return
        observations = [
            Observation(trial.params, trial.loss if trial.state == TRIAL_SUCCEEDED else None)
            for trial in trials
            if trial.state in (TRIAL_SUCCEEDED, FAILED)
        ]
        # The GP and Optuna engines cap BLAS threads around each suggestion themselves (threads.py).
        points = self._optimizers[region].suggest(wanted, observations, [t.params for t in in_flight])
        if not points:
            self._exhausted.add(region)
            where = f" for {region}" if region else ""
            self.say(f"search space exhausted{where}: every point has been tried")
        for params in points:
            if self._stop.is_set():
                return
            trial = self.store.add_trial(self.name, region, params, self.options.engine, self.options.trial_timeout_s)
            self._submit(trial, "submitted")

    def _submit(self, trial: Trial, verb: str) -> None:
        plan = self.source.plan(trial.region, trial.number, trial.params, trial.run_id)
        try:
            handle = self.engine.submit(plan, self.runs_dir / trial.run_id)
        except DagflowError:
            self.say(f"[{trial.label}] could not be submitted; it stays recorded and is submitted on restart")
            raise
        self.store.mark_submitted(trial, handle)
        self.say(f"[{trial.label}] {verb} {params_text(trial.params)} (run {trial.run_id}, job {handle})")

    # -- collecting ----------------------------------------------------------------------------------

    def _collect(self, region: str) -> None:
        for trial in self.store.trials(self.name, region):
            if trial.state != RUNNING:
                continue
            run_dir = self.runs_dir / trial.run_id
            if time.time() > trial.deadline:
                self._cancel(run_dir)
                limit = trial.deadline - trial.created
                self._end(trial, FAILED, error=f"deadline: still not finished after {limit:.0f} s; cancelled")
                continue
            observed = observe_run(run_dir, trial.submitted or trial.created, self.options.start_grace_s)
            if observed.state == SUCCEEDED:
                self._succeeded(trial, run_dir)
            elif observed.state == FAILED_RUN:
                self._end(trial, FAILED, error=observed.why)
            elif observed.state in (VANISHED, NOT_STARTED):
                self._end(trial, FAILED, error=f"vanished: {observed.why}")

    def _succeeded(self, trial: Trial, run_dir: Path) -> None:
        try:
            value = self.source.objective(RunLayout.from_run_dir(run_dir).load_plan())
        except (TrialError, DagflowError) as error:
            self._end(trial, FAILED, error=f"no objective: {error}")
            return
        self._end(trial, TRIAL_SUCCEEDED, value=value)

    def _end(self, trial: Trial, state: str, value: float | None = None, error: str | None = None) -> None:
        trial_loss = loss(value, self.source.goal) if value is not None else None
        if not self.store.finish(trial, state, value, trial_loss, error):
            return
        if state == TRIAL_SUCCEEDED:
            best = self._best(trial.region)
            tail = f" (best {best.value:.6g}, {best.label})" if best is not None else ""
            self.say(f"[{trial.label}] succeeded {self.source.metric}={value:.6g}{tail}")
        else:
            self.say(f"[{trial.label}] {state}: {error}")

    def _best(self, region: str) -> Trial | None:
        return best_trial(self.store.trials(self.name, region))

    def _finished(self, region: str) -> bool:
        trials = self.store.trials(self.name, region)
        if any(trial.state in IN_FLIGHT for trial in trials):
            return False
        return region in self._exhausted or sum(1 for t in trials if t.state in COUNTED) >= self.budget

    # -- stopping ------------------------------------------------------------------------------------

    def _cancel(self, run_dir: Path) -> None:
        try:
            self.engine.cancel(run_dir)
        except (DagflowError, OSError) as error:
            self.say(f"could not cancel run {run_dir.name}: {error}")

    def _cancel_in_flight(self) -> None:
        for trial in self.store.trials(self.name):
            if trial.state in IN_FLIGHT:
                self._cancel(self.runs_dir / trial.run_id)
                self._end(trial, CANCELLED, error="stopped with the scheduler")
        self.say(f"search {self.name} stopped; run the same command again to continue it")

    def _summary(self) -> int:
        code = EXIT_DONE
        for region in self.source.regions:
            best = self._best(region)
            where = f" {region}" if region else ""
            if best is None:
                self.say(f"search {self.name}{where} done: no trial succeeded")
                code = EXIT_NO_RESULT
            else:
                self.say(
                    f"search {self.name}{where} done: best {self.source.metric}={best.value:.6g} at {best.label} "
                    f"{params_text(best.params)}"
                )
        return code
