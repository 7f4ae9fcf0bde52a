"""Recovery and adoption: what a runner takes over from the earlier runners of its run. Finished nodes
count as done unless their inputs were edited since; of the nodes an earlier runner's keeper started
and the journal does not show finished (sorted by recovery.py), one still running is adopted (waited
for with a pidfd, its exit read from its keeper's record), the recorded exit of one that ended while no
runner was alive is its result, and a lost one is killed, and rerun.

A mixin of LocalRunner (runner.py), on the runner's own tables.
"""

from __future__ import annotations

import os
import selectors
import time
from collections.abc import Callable

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.graph import DagTracker
from dagflow.engines.jobs.release import takes_over
from dagflow.engines.local.node_reaper import NodeReaper
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.procs import ProcEntry, keeper_alive, kill_orphans, node_alive, read_procs
from dagflow.engines.local.recovery import Fate, unjournaled, unrecorded_starts
from dagflow.engines.local.resources import Gpu, ResourcePool
from dagflow.engines.local.running_node import RunningNode
from dagflow.engines.local.usage_recorder import Measured, UsageRecorder
from dagflow.plan import Plan
from dagflow.run.journal import PENDING, RUNNING, JournalState, JournalWriter, NodeRecord, start_event
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter

HAS_PIDFD = hasattr(os, "pidfd_open")
_EXIT_RECORD_WAIT_S = 10.0  # how long an adopted node's keeper may take to record its exit


class Adoption:
    """Taking over an earlier runner's nodes. Uses the runner's attributes below, `_exited` and
    `_finished` (outcomes.py)."""

    plan: Plan
    layout: RunLayout
    options: RunOptions
    forget: frozenset[str]
    cache: NodeCache | None
    pool: ResourcePool
    reaper: NodeReaper
    usage: UsageRecorder
    reporter: Reporter
    journal: JournalWriter
    selector: selectors.BaseSelector
    tracker: DagTracker
    running: dict[str, RunningNode]
    states: dict[str, str]
    keys: dict[str, str]
    attempts: dict[str, int]
    failed_tries: dict[str, int]
    restarts: dict[str, int]
    _stops_handled: int
    _add_timer: Callable[[float, str, str, int], None]  # Limits.add (limits.py)
    _exited: Callable[[RunningNode, int], None]  # outcomes.py
    _finished: Callable[[RunningNode, int, str | None], None]  # outcomes.py
    _prior: Callable[[], JournalState]  # jobs/release.py Release

    def _carry_over(self) -> tuple[JournalState, set[str], dict[str, ProcEntry], dict[str, ProcEntry]]:
        """Read what earlier runners journaled: (that journal, the nodes done, the processes to adopt, those
        whose recorded exit to accept); lost processes are killed here."""
        prior = self._prior()
        done = self._carry_done(prior)
        self.restarts = {name: record.restarts for name, record in prior.nodes.items() if record.restarts}
        adopt, accept = self._recover(prior, done)
        return prior, done, adopt, accept

    def _recover(self, prior: JournalState, done: set[str]) -> tuple[dict[str, ProcEntry], dict[str, ProcEntry]]:
        """Sort the processes earlier runners started and did not journal as finished (recovery.py): still
        running and adoptable, exited with a recorded result, or lost (killed here, and rerun)."""
        adopt: dict[str, ProcEntry] = {}
        accept: dict[str, ProcEntry] = {}
        lost: list[tuple[int, str]] = []
        procs = read_procs(self.layout.procs_path)
        for name, entry, fate in unjournaled(procs, prior.nodes, self.layout.run_dir):
            wanted = takes_over(self.plan, prior, done, name)
            if fate is Fate.EXITED:
                if wanted:
                    accept[name] = entry
            elif not wanted or fate is Fate.LOST:
                lost.append((entry.pid, name))
            elif fate is Fate.HELD:
                adopt[name] = entry
            else:  # EXITING: wait for its keeper to record how
                entry.rc = self._recorded_exit(name, entry.pid, entry.keeper)
                if entry.rc is None:
                    lost.append((entry.pid, name))
                else:
                    accept[name] = entry
        lost += unrecorded_starts(procs, prior.nodes)
        if lost:
            kill_orphans(lost, self.layout.run_id, self.options.kill_grace_s)
        return adopt, accept

    def _take_over(
        self, name: str, entry: ProcEntry, record: NodeRecord | None, gpus: tuple[Gpu, ...] | None
    ) -> RunningNode:
        """A RunningNode for a node an earlier runner started; journals its start if that runner could not."""
        node = self.plan.nodes[name]
        self.attempts[name] = entry.attempt
        self.failed_tries[name] = max(0, entry.attempt - 1 - self.restarts.get(name, 0))
        if self.cache is not None:
            self.keys[name] = self.cache.key(self.plan, node, [self.keys.get(p, p) for p in node.parents])
        if record is None or record.pid != entry.pid:
            self.journal.write(start_event(name, entry.attempt, pid=entry.pid))
        running = RunningNode(
            name,
            self.plan.steps[node.step],
            entry.attempt,
            time.monotonic(),
            gpus or (),
            pid=entry.pid,
            res=self.plan.steps[node.step].resources if gpus is not None else None,
            holds=gpus is not None,
            adopted=True,
            keeper=entry.keeper,
        )
        self.running[name] = running
        self.states[name] = RUNNING
        return running

    def _accept(self, name: str, entry: ProcEntry, record: NodeRecord | None) -> None:
        """A node that exited while no runner was alive: its recorded exit is its result."""
        running = self._take_over(name, entry, record, None)
        running.measured = Measured.of(entry.usage)
        rc = entry.rc if entry.rc is not None else -1
        self._finished(running, rc, None)

    def _adopt(self, name: str, entry: ProcEntry, record: NodeRecord | None) -> None:
        """A node still running: wait for it (a pidfd says when it exits; its keeper records how)."""
        step = self.plan.steps[self.plan.nodes[name].step]
        running = self._take_over(name, entry, record, self.pool.acquire(step.resources))
        self.reaper.adopted(entry.pid)
        self.usage.started(name, tuple(gpu.index for gpu in running.gpus), entry.pid)
        self.reporter.node_started(name, entry.attempt, ())
        if step.timeout_s:
            ran = time.time() - record.started if record is not None and record.started else 0.0
            self._add_timer(time.monotonic() + max(0.0, step.timeout_s - ran), "timeout", name, entry.attempt)
        if not HAS_PIDFD:
            return
        try:
            running.pidfd = os.pidfd_open(entry.pid)
        except ProcessLookupError:  # it exited a moment ago
            self._adopted_exited(running)
        else:
            self.selector.register(running.pidfd, selectors.EVENT_READ, running)

    def _poll_adopted(self) -> None:
        """Without pidfds: look for adopted nodes that have exited."""
        run_id = self.layout.run_id
        for running in list(self.running.values()):
            if running.adopted and not node_alive(running.pid or 0, run_id, running.name):
                self._adopted_exited(running)

    def _adopted_exited(self, running: RunningNode) -> None:
        if running.pidfd is not None:
            self.selector.unregister(running.pidfd)
            os.close(running.pidfd)
            running.pidfd = None
        rc = self._recorded_exit(running.name, running.pid or 0, running.keeper)
        if rc is not None:
            recorded = read_procs(self.layout.procs_path).get(running.name)
            running.measured = Measured.of(recorded.usage if recorded is not None else None)
            self._exited(running, rc)
            return
        # Its keeper died before recording the exit: nothing says how it went, so it runs again.
        del self.running[running.name]
        if running.holds:
            self.pool.release(running.step.resources, running.gpus)
        self.states[running.name] = PENDING
        if not self._stops_handled:
            self.tracker.push(running.name, front=True)

    def _recorded_exit(self, name: str, pid: int, keeper: int | None) -> int | None:
        """The exit code an earlier runner's keeper records for a node that has exited (None: never)."""
        deadline = time.monotonic() + _EXIT_RECORD_WAIT_S
        while True:
            alive = keeper_alive(keeper, self.layout.run_dir)
            entry = read_procs(self.layout.procs_path).get(name)
            if entry is not None and entry.pid == pid and entry.rc is not None:
                return entry.rc
            if not alive or time.monotonic() > deadline:
                return None
            time.sleep(0.01)
