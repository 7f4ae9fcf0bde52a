"""What every DAG scheduler of dagflow's does alike (the local runner's event loop, engines/local/, and the job
scheduler, scheduler.py): which nodes become ready and what an attempt's end means (Release, with
retries_left and checkpoint_exit), and driving a run from the foreground: stopping on Ctrl-C and SIGTERM, and
the run's result (Driving). The mixins work on their user's own tables: no indirection on the per-node path.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Collection
from types import FrameType

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.graph import DagTracker
from dagflow.plan import Plan, StepInfo
from dagflow.run.exits import describe_exit
from dagflow.run.journal import (
    CACHED,
    CHECKPOINTED,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRY,
    RETRYING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalState,
    JournalWriter,
    cached_event,
    end_event,
    finish_event,
    read_journal,
    replan_event,
    run_event,
    upstream_failed_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter, RunInfo
from dagflow.run.result import RUN_FAILED, RUN_INTERRUPTED, RUN_SUCCEEDED, Failure, RunResult

# A test's crash point (tests/test_local_cache_durable.py): the driver SIGKILLs itself after writing a success's
# cache entry and before its journal event, the one moment the two disagree.
_KILL_BETWEEN_WRITES = os.environ.get("DAGFLOW_TEST_KILL_BETWEEN_WRITES") == "1"


class Release:
    """Releasing nodes whose parents are done: cached ones are skipped (cascading), the rest queued."""

    plan: Plan
    tracker: DagTracker
    cache: NodeCache | None
    journal: JournalWriter
    reporter: Reporter
    states: dict[str, str]
    keys: dict[str, str]
    forced: set[str]
    forget: frozenset[str]  # finished nodes whose files were edited since they ran: they run again
    layout: RunLayout
    failed_tries: dict[str, int]  # failed attempts (what retries count)
    restarts: dict[str, int]  # checkpoint restarts over the whole run (what max_restarts caps)
    failures: list[Failure]

    def _prior(self) -> JournalState:
        """What the run's earlier drivers journaled (its malformed lines said, and skipped)."""
        prior = read_journal(self.layout.journal_path)
        if prior.bad_lines:
            print(
                f"dagflow: skipped {prior.bad_lines} malformed line(s) in {self.layout.journal_path}", file=sys.stderr
            )
        return prior

    def _journal_start(self, prior: JournalState) -> None:
        """This driver's start, and the finished nodes it runs again because they were edited since (durable)."""
        self.journal.write(run_event(prior.runners > 0, pid=os.getpid()), durable=True)
        if self.forget:
            self.journal.write(replan_event(sorted(self.forget)), durable=True)

    def _open(self, info: RunInfo, done: set[str], taken: Collection[str], force: tuple[str, ...]) -> None:
        """Start driving: the run reported started, and the nodes ready at its start released, but `taken`
        (those whose jobs an earlier driver left, which are waited for instead)."""
        self.tracker = DagTracker(self.plan, done)
        self.forced = self._forced_nodes(force)
        self.reporter.run_started(info)
        self._release([name for name in self.tracker.initially_ready() if name not in taken])

    def _carry_done(self, prior: JournalState) -> set[str]:
        """What of the run earlier drivers finished, and stays finished: not edited since (`forget`, which
        they journal as re-planned), with their states and cache keys taken over."""
        self.forget = self._edited_since(prior)
        done = {name for name in prior.done() if name in self.plan.nodes and name not in self.forget}
        for name in done:
            record = prior.nodes[name]
            self.states[name] = record.state
            if record.key:
                self.keys[name] = record.key
        return done

    def _edited_since(self, prior: JournalState) -> frozenset[str]:
        """Finished nodes whose cache key changed since they ran (an edited script, config or input file),
        and the finished nodes downstream of them: a resume runs them again rather than keep stale results."""
        if self.cache is None:
            return frozenset()
        finished = prior.done()
        edited: set[str] = set()
        for name, node in self.plan.nodes.items():  # topological order: parents first
            record = prior.nodes.get(name)
            if name not in finished or record is None or not record.key:
                continue
            if any(parent in edited for parent in node.parents):
                edited.add(name)
                continue
            keys = [self._recorded_key(prior, parent) for parent in node.parents]  # as _release gives them
            if self.cache.key(self.plan, node, keys) != record.key:
                edited.add(name)
        if edited:
            shown = ", ".join(sorted(edited)[:5]) + (", ..." if len(edited) > 5 else "")
            print(
                f"dagflow: {len(edited)} finished node(s) of run {self.layout.run_id} changed since they ran "
                f"(a script, configuration or input file was edited): running them again: {shown}",
                file=sys.stderr,
            )
        return frozenset(edited)

    @staticmethod
    def _recorded_key(prior: JournalState, name: str) -> str:
        record = prior.nodes.get(name)
        return (record.key if record is not None else None) or name

    def _failed_for_good(self, name: str, why: str) -> None:
        """name failed with no try left: the run's failure, and its descendants blocked (journaled, reported)."""
        self.states[name] = FAILED
        tries = self.failed_tries.get(name, 0) + 1
        self.failures.append(Failure(name, why, tries, self.layout.failure_log(name)))
        blocked = self.tracker.failed(name)
        if blocked:
            for child in blocked:
                self.states[child] = UPSTREAM_FAILED
            self.journal.write(upstream_failed_event(blocked, name), durable=True)
            self.reporter.nodes_blocked(blocked, name)

    def _forced_nodes(self, force: tuple[str, ...]) -> set[str]:
        """The nodes --force names (by node or step), and every node downstream of them."""
        if not force:
            return set()
        wanted = set(force)
        forced = {name for name, node in self.plan.nodes.items() if name in wanted or node.step in wanted}
        children = self.tracker.children
        stack = list(forced)
        while stack:
            for child in children[stack.pop()]:
                if child not in forced:
                    forced.add(child)
                    stack.append(child)
        return forced

    def _release(self, names: list[str]) -> None:
        """Nodes whose parents are all done: skip the cached ones (cascading), queue the rest."""
        stack = list(reversed(names))
        cache = self.cache
        nodes = self.plan.nodes
        while stack:
            name = stack.pop()
            if cache is None:
                self.tracker.push(name)
                continue
            node = nodes[name]
            keys = self.keys
            key = cache.key(self.plan, node, [keys.get(parent, parent) for parent in node.parents])
            keys[name] = key
            if name not in self.forced and cache.hit(self.plan, key, node):
                self.states[name] = CACHED
                self.journal.write(cached_event(name, key), durable=True)
                self.reporter.node_cached(name)
                stack.extend(reversed(self.tracker.succeeded(name)))
            else:
                self.tracker.push(name)


    def _attempt_ended(
        self, name: str, step: StepInfo, attempt: int, rc: int, why: str | None, killed: str | None,
        stopping: bool, duration: float, grown_mb: int | None = None,
    ) -> None:  # fmt: skip
        """An attempt of `name` ended with `rc` (`why`: its failure, None for a clean exit): what that means
        (succeeded, interrupted, checkpointed, a try that runs again, failed for good), journaled and reported,
        and what follows (its children released or blocked, or itself queued again). `killed` is why dagflow
        stopped it ("timeout", "interrupt", "oom"; None: it ended by itself); `grown_mb` is the memory an
        out-of-memory attempt runs again with (None: its limit cannot grow)."""
        if killed == "timeout":
            why = f"timed out after {step.timeout_s}s"
        elif killed == "interrupt":
            why = "interrupted"
        elif why is None and rc != 0:
            why = describe_exit(rc)
        checkpoint = checkpoint_exit(step, rc, killed is not None, self.restarts.get(name, 0))
        if checkpoint is not None:
            why = checkpoint[1]
        failed_try = True  # an attempt that counts against `retries`
        if killed == "interrupt":
            state = INTERRUPTED
        elif why is None:
            state = SUCCEEDED
        elif checkpoint is not None and checkpoint[0]:
            state = CHECKPOINTED
            self.restarts[name] = self.restarts.get(name, 0) + 1
        elif killed == "oom" and not stopping:
            if grown_mb:  # runs again with more memory: not a failed try that `retries` counts
                state, failed_try = RETRY, False
                why = f"{why}; again with {grown_mb} MB (memory_max {step.resources.memory_max_mb} MB)"
            else:
                state, why = FAILED, f"{why}, at its memory_max"
        elif retries_left(step, self.failed_tries.get(name, 0), rc, killed is not None, stopping):
            state = RETRY
        else:
            state = FAILED
        key = self.keys.get(name) if state == SUCCEEDED else None
        self.journal.write(end_event(name, state, attempt=attempt, rc=rc, why=why, key=key), durable=True)
        self.reporter.node_finished(name, state, self.failed_tries.get(name, 0) + 1, rc, why, duration)
        if state == SUCCEEDED:
            self.states[name] = SUCCEEDED
            if key and self.cache is not None:
                self.cache.record(key, self.plan, self.plan.nodes[name])
            self._release(self.tracker.succeeded(name))
        elif state in (RETRY, CHECKPOINTED):  # a checkpoint's files stay where it wrote them: it starts from them
            if state == RETRY and failed_try:
                self.failed_tries[name] = self.failed_tries.get(name, 0) + 1
            self.states[name] = RETRYING if state == RETRY else CHECKPOINTED
            if not stopping:
                self.tracker.push(name, front=True)
        elif state == INTERRUPTED:
            self.states[name] = INTERRUPTED
        else:
            self._failed_for_good(name, why or describe_exit(rc))

    def _commit(self, sync_now: bool = False) -> float | None:
        """Write what this turn decided: the cache entries of its successes, then the journal (which returns when
        it wants the next commit, `JournalWriter.commit`). In this order a kill -9 at any moment leaves each
        success in the cache, or in the journal, or in both: a success only journaled would be run again by the
        next plain run, which looks in the cache; one only cached is an end the next run takes from the executor
        (the local keeper's record, a job found by its key)."""
        if self.cache is not None and self.cache.flush() and _KILL_BETWEEN_WRITES:
            os.kill(os.getpid(), signal.SIGKILL)
        if sync_now:
            self.journal.flush()
            return None
        return self.journal.commit()


def takes_over(plan: Plan, prior: JournalState, done: Collection[str], name: str) -> bool:
    """Whether a driver takes over the job an earlier one left of `name` (waits for it, or takes its end): the
    node is in the plan, not finished, not re-planned since (its job runs what an edit changed), and every parent
    of it is done (a parent that runs again, its input edited since, leaves the job running on stale output).
    Any other job left behind is stopped, and the node runs when its turn comes."""
    node = plan.nodes.get(name)
    return (
        node is not None
        and name not in done
        and name not in prior.replanned
        and all(parent in done for parent in node.parents)
    )

def retries_left(step: StepInfo, failed_tries: int, rc: int | None, killed: bool, stopping: bool) -> bool:
    """Whether a failed attempt runs again: tries are left, the run is not stopping, and (when it exited by
    itself) its code is not one of the step's `retries.unless_exit`."""
    if failed_tries >= step.retries or stopping:
        return False
    return killed or rc is None or rc < 0 or rc not in step.retry_unless_exit


def checkpoint_exit(step: StepInfo, rc: int, killed: bool, restarts: int) -> tuple[bool, str] | None:
    """An attempt that exited by itself with its step's checkpoint exit code, after `restarts` restarts from its
    checkpoint: (whether it restarts from it once more, why); None: not a checkpoint exit. One that may not
    restart again is a failure, which `retries` may retry."""
    if step.checkpoint_exit_code is None or rc != step.checkpoint_exit_code or killed:
        return None
    if restarts < step.checkpoint_max_restarts:
        return True, f"checkpointed (exit code {rc}): restart {restarts + 1} of {step.checkpoint_max_restarts}"
    return False, f"exit code {rc} after {restarts} checkpoint restarts (checkpoint.max_restarts)"


class Driving:
    """Stopping on signals and the run's result. Uses its user's attributes below and its `request_stop`."""

    plan: Plan
    layout: RunLayout
    reporter: Reporter
    journal: JournalWriter
    states: dict[str, str]
    failures: list[Failure]
    request_stop: Callable[[], None]
    _commit: Callable[..., float | None]  # Release

    def _install_signal_handlers(self, enabled: bool) -> Callable[[], None]:
        """SIGINT and SIGTERM request a stop while the run is driven (on the main thread only); the restorer."""
        if not enabled or threading.current_thread() is not threading.main_thread():
            return lambda: None

        def on_signal(signum: int, frame: FrameType | None) -> None:
            self.request_stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _result(self, t0: float, resumed_done: int, stopped: bool) -> RunResult:
        """The run's result (a node stopped between two attempts is interrupted), journaled and reported."""
        state = RUN_INTERRUPTED if stopped else RUN_FAILED if self.failures else RUN_SUCCEEDED
        self.journal.write(finish_event(state), durable=True)
        self._commit(sync_now=True)
        states = {name: self.states.get(name, PENDING) for name in self.plan.nodes}
        for name, node_state in states.items():
            if node_state in (RETRYING, CHECKPOINTED):
                states[name] = INTERRUPTED
        result = RunResult(
            run_id=self.layout.run_id, run_dir=self.layout.run_dir, state=state, states=states,
            duration_s=time.monotonic() - t0, failures=self.failures, resumed_done=resumed_done,
        )  # fmt: skip
        self.reporter.run_finished(result)
        return result
