"""What every DAG scheduler of dagflow's does alike (the local runner's event loop, engines/local/, and the job
scheduler, scheduler.py): which nodes become ready (Release), whether a failed attempt runs again
(retries_left), and driving a run from the foreground: stopping on Ctrl-C and SIGTERM, and the run's result
(Driving). The mixins work on their user's own tables: no indirection on the per-node path.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.graph import DagTracker
from dagflow.plan import Plan, StepInfo
from dagflow.run.journal import (
    CACHED,
    CHECKPOINTED,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    UPSTREAM_FAILED,
    JournalState,
    JournalWriter,
    cached_event,
    upstream_failed_event,
)
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter
from dagflow.run.result import Failure, RunResult


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
    failures: list[Failure]

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
    reporter: Reporter
    states: dict[str, str]
    failures: list[Failure]
    request_stop: Callable[[], None]

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

    def _run_result(self, run_id: str, run_dir: Path, state: str, t0: float, resumed_done: int) -> RunResult:
        """The run's result (a node stopped between two attempts is interrupted), reported."""
        states = {name: self.states.get(name, PENDING) for name in self.plan.nodes}
        for name, node_state in states.items():
            if node_state in (RETRYING, CHECKPOINTED):
                states[name] = INTERRUPTED
        result = RunResult(
            run_id=run_id, run_dir=run_dir, state=state, states=states, duration_s=time.monotonic() - t0,
            failures=self.failures, resumed_done=resumed_done,
        )  # fmt: skip
        self.reporter.run_finished(result)
        return result
