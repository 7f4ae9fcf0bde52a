"""The local runner: one event loop that runs a plan's nodes as processes on this machine.

Nodes are started, waited for and recorded by the run's keeper (keeper.py), a small process that
outlives a killed runner: the runner sends it start requests and reads back, over one pipe, each node's
pid and later its exit. The loop waits on one selector holding that pipe, a self-pipe for stop requests
and, for nodes adopted from a runner that died, a pidfd each, with a timeout set by the nearest timer
(node timeouts, SIGKILL escalations, progress ticks, the journal's next sync). It does not poll (except
for adopted nodes on kernels without pidfds) and starts no thread. The events of each turn of the loop
are written to the journal with one write before it waits again; the journal fdatasyncs exits in groups
(journal.py).

On a resume, a node the journal does not show finished is adopted when its process still runs, and its
recorded result is taken when it exited while no runner was alive (procs.py says how they are found).

What a node started outside its process group (setsid) is killed after it ends, and whatever the run's
nodes left at the end of the run (node_reaper.py: a cgroup for the run where the machine allows one).

Nodes run in the plan's workdir: the keeper moves there as it starts (it starts nodes with posix_spawn,
which cannot change directory). The runner never changes its own working directory, so a program may
embed it in a thread: every path it keeps is absolute.

A full disk (or quota, or file size limit) under the runs directory stops the runner with
RunStorageError: the journal's torn line is cut off again, nodes that run are left running, and a later
`--resume` adopts them.
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import itertools
import math
import os
import selectors
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from dagflow.engines.local.cache import NodeCache
from dagflow.engines.local.gpu_memory import GpuMemoryUnknownError, with_gpu_memory
from dagflow.engines.local.gpu_sampler import GpuSampler, NvmlReader
from dagflow.engines.local.graph import DagTracker
from dagflow.engines.local.keeper import read_replies, request
from dagflow.engines.local.memory_limit import MEMORY_CHECK_S, MemoryGrowth, group_rss_mb
from dagflow.engines.local.memory_limit import enforced as memory_enforced
from dagflow.engines.local.node_reaper import NodeReaper
from dagflow.engines.local.open_files import nodes_within_open_files
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.procs import (
    Child,
    ProcEntry,
    command_for,
    held_by_keeper,
    keeper_alive,
    kill_group,
    kill_orphans,
    node_alive,
    read_procs,
    resolve_program,
    start_keeper,
    with_interpreter_on_path,
)
from dagflow.engines.local.queueing import FollowerQueueing
from dagflow.engines.local.reporting import Reporter, RunInfo
from dagflow.engines.local.resources import Gpu, Machine, ResourcePool, within
from dagflow.engines.local.result import RUN_FAILED, RUN_INTERRUPTED, RUN_SUCCEEDED, Failure, RunResult
from dagflow.engines.local.usage_recorder import Measured, UsageRecorder, attempt_key
from dagflow.errors import DagflowError
from dagflow.plan import DAGFLOW_LAUNCHER, Node, Plan, Resources, StepInfo
from dagflow.run.exits import describe_exit
from dagflow.run.journal import (
    CACHED,
    CHECKPOINTED,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalState,
    JournalWriter,
    NodeRecord,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.lock import RunLock

_HAS_PIDFD = hasattr(os, "pidfd_open")
_FALLBACK_POLL_S = 0.02  # adopted nodes without pidfds (not Linux) are watched by polling at this interval
_LONGEST_WAIT_S = 86400.0  # epoll refuses waits past INT_MAX ms (24.8 days): a long timeout wakes daily
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_EXIT_RECORD_WAIT_S = 10.0  # how long an adopted node's keeper may take to record its exit
_KEEPER = 1  # selector data of the keeper's reply pipe (None: the wake pipe; a _Running: a pidfd)


class RunStorageError(DagflowError):
    """The run directory cannot be written (a full disk): the runner stopped; resume when there is room."""


class KeeperLostError(DagflowError):
    pass


@dataclass(slots=True)
class _Running:
    name: str
    step: StepInfo
    attempt: int
    started: float  # monotonic
    gpus: tuple[Gpu, ...]
    res: Resources | None = None  # what it holds (or will, as a follower); None: an adopted node holding nothing
    pid: int | None = None  # None until the keeper says it started
    kill_reason: str | None = None  # "timeout" or "interrupt" once the runner has sent SIGTERM
    pending_signal: int | None = None  # a signal to send as soon as the pid is known
    holds: bool = True  # holds its resources in the pool
    adopted: bool = False  # started by a runner that died; its keeper is not ours
    keeper: int | None = None  # an adopted node's keeper pid
    pidfd: int | None = None  # an adopted node's pidfd
    measured: Measured | None = None  # what its keeper measured at its exit
    # A follower waits in the keeper for its leader to exit and then starts in the leader's slot, on the
    # leader's resources (keeper.py); it holds nothing of its own until the runner hears the leader ended.
    leader: _Running | None = None
    follower: _Running | None = None


class LocalRunner:
    """Runs (or resumes) the run in `layout` until every node has finished or the run is stopped.

    `request_stop()` may be called from another thread or a signal handler: running nodes get SIGTERM,
    then SIGKILL after `kill_grace_s`; a second request kills them at once. `forget` names finished
    nodes to run again (the pipeline changed them since; engine.py decides).
    """

    def __init__(
        self, plan: Plan, layout: RunLayout, machine: Machine, options: RunOptions, forget: frozenset[str] = frozenset()
    ) -> None:
        self.plan = plan
        self.layout = RunLayout(layout.runs_dir.absolute(), layout.run_id)  # as the keeper sees it, from the workdir
        self.options = options
        self.forget = forget
        self.jobs = nodes_within_open_files(options.jobs or machine.cpus)
        self.pool = ResourcePool(machine, self.jobs)
        self.memory = MemoryGrowth(machine.memory_mb)  # nodes' memory limits, grown after an overrun
        gpu_reader = NvmlReader.open() if machine.gpus else None
        self.usage = UsageRecorder(self.layout.run_dir, GpuSampler(gpu_reader), self.jobs)
        self.reporter = options.reporter or Reporter()
        self.workdir = os.path.realpath(plan.workdir)
        self.running: dict[str, _Running] = {}
        self.states: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.attempts: dict[str, int] = {}  # starts, restarts from a checkpoint included
        self.failed_tries: dict[str, int] = {}  # failed attempts (what retries count)
        self.restarts: dict[str, int] = {}  # checkpoint restarts over the whole run (what max_restarts caps)
        self.failures: list[Failure] = []
        self._timers: list[tuple[float, int, str, str, int]] = []  # (when, seq, kind, node, attempt)
        self._seq = itertools.count()
        self._sync_in: float | None = None  # seconds until the journal wants commit() again
        self._outbox: list[bytes] = []  # start requests not yet written to the keeper
        self._following = 0  # followers waiting in the keeper for their leader's exit (not holding a slot)
        self.queueing = FollowerQueueing()
        self._replies = bytearray()
        self._leave_running = False  # stopped for a full disk: nodes run on, a resume adopts them
        self._stop_requests = 0
        self._stops_handled = 0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)

    # --- public -------------------------------------------------------------------------------------

    def request_stop(self, *_: object) -> None:
        self._stop_requests += 1
        with contextlib.suppress(OSError):  # a full pipe already wakes the loop; a closed one: run over
            os.write(self._wake_w, b"x")

    def run(self) -> RunResult:
        """Run to the end; a runner runs once."""
        lock = RunLock(self.layout.lock_path)
        try:
            lock.acquire()
            self.journal = JournalWriter(self.layout.journal_path)
        except BaseException as error:
            self._close_wake_pipe()
            lock.release()
            if isinstance(error, OSError) and error.errno in _DISK_FULL:
                raise self._stop_for_storage(error) from None
            raise
        restore = self._install_signal_handlers()
        self.cache = (
            NodeCache(Path(self.options.cache_dir or self.layout.cache_dir).absolute(), Path(self.workdir))
            if self.options.use_cache
            else None
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._env = dict(os.environ)
        self._env["PATH"] = with_interpreter_on_path(self._env.get("PATH", ""))
        self._env["DAGFLOW_RUN_ID"] = self.layout.run_id
        self._env["DAGFLOW_RUN_DIR"] = str(self.layout.run_dir)
        self.reaper = NodeReaper.for_run(self.layout.run_id, self.layout.run_dir, self._env)
        self.keeper: Child | None = None
        try:
            self.keeper, self._requests_w, self._replies_r = start_keeper(self.layout.run_dir, self.workdir, self._env)
            self.reaper.contain(self.keeper.pid)  # before any node starts: each is born in the run's cgroup
            self.selector.register(self._replies_r, selectors.EVENT_READ, _KEEPER)
            return self._run()
        except OSError as error:
            if error.errno not in _DISK_FULL:
                raise
            raise self._stop_for_storage(error) from None
        finally:
            self._shut_down()
            restore()
            lock.release()
            with contextlib.suppress(OSError, ValueError):  # what it had to say before an error stopped the run
                self.reporter.flush()

    def _stop_for_storage(self, error: OSError) -> RunStorageError:
        self._leave_running = True
        run_id = self.layout.run_id
        started = sum(1 for running in self.running.values() if running.leader is None)
        left = f"; {started} running node(s) left running" if started else ""
        return RunStorageError(
            f"run {run_id} stopped: cannot write under {self.layout.runs_dir}: {error.strerror or error}{left}; "
            f"free some space, then `dagflow run --resume {run_id}`"
        )

    def _shut_down(self) -> None:
        """Close everything; after an unexpected error, kill what still runs."""
        if not self._leave_running:
            for running in list(self.running.values()):
                self._signal(running, signal.SIGKILL)
        for running in self.running.values():
            if running.pidfd is not None:
                os.close(running.pidfd)
        if self.keeper is not None:
            os.close(self._requests_w)  # the keeper exits once its nodes have
            if self._leave_running:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.keeper.pid, os.WNOHANG)
            else:
                self._kill_unseen_starts()
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(self.keeper.pid, 0)
            os.close(self._replies_r)
        if not self._leave_running:
            self.reaper.close()  # once the keeper has reaped every node
        with contextlib.suppress(OSError):
            self.usage.flush()
        self.usage.close()
        with contextlib.suppress(OSError):
            self.journal.close()
        if self.cache is not None:
            with contextlib.suppress(OSError):
                self.cache.close()
        self.selector.close()
        self._close_wake_pipe()

    def _kill_unseen_starts(self) -> None:
        """Read the keeper's last replies until it exits, killing nodes whose start was not seen yet."""
        os.set_blocking(self._replies_r, True)
        with contextlib.suppress(OSError):
            while chunk := os.read(self._replies_r, 1 << 16):
                self._replies += chunk
                for kind, _, _, value in read_replies(self._replies):
                    if kind == "s":
                        kill_group(value, signal.SIGKILL)

    def _close_wake_pipe(self) -> None:
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)

    # --- setup --------------------------------------------------------------------------------------

    def _install_signal_handlers(self) -> Callable[[], None]:
        if not self.options.handle_signals or threading.current_thread() is not threading.main_thread():
            return lambda: None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}

        def restore() -> None:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

        return restore

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.request_stop()

    def _run(self) -> RunResult:
        t0 = time.monotonic()
        prior = read_journal(self.layout.journal_path)
        if prior.bad_lines:
            print(
                f"dagflow: skipped {prior.bad_lines} malformed line(s) in {self.layout.journal_path}",
                file=sys.stderr,
            )
        self.forget = self.forget | self._edited_since(prior)
        done = {name for name in prior.done() if name in self.plan.nodes and name not in self.forget}
        self.restarts = {name: record.restarts for name, record in prior.nodes.items() if record.restarts}
        for name in done:
            self.states[name] = prior.nodes[name].state
            key = prior.nodes[name].key
            if key:
                self.keys[name] = key
        adopt, accept = self._recover(prior, done)
        self.journal.write({"e": "run", "pid": os.getpid(), "resume": prior.runners > 0}, durable=True)
        forgotten = sorted(name for name in self.forget if name in prior.nodes)
        if forgotten:
            self.journal.write({"e": "replan", "n": forgotten}, durable=True)
        self.journal.flush()
        self.tracker = DagTracker(self.plan, done)
        self.forced = self._forced_nodes()
        self.reporter.run_started(
            RunInfo(self.plan, self.layout.run_id, self.layout.run_dir, self.jobs, prior.runners > 0, done)
        )
        taken = set(adopt) | set(accept)
        self._release([name for name in self.tracker.initially_ready() if name not in taken])
        for name, entry in adopt.items():
            self._adopt(name, entry, prior.nodes.get(name))
        for name, entry in accept.items():
            self._accept(name, entry, prior.nodes.get(name))
        while True:
            if self._stops_handled == 0:
                self._start_ready()
            if self._outbox:
                self._send_requests()
            if not self.running:
                if self._stops_handled or not self.tracker.has_ready():
                    break
                raise RuntimeError("ready nodes fit nowhere although nothing runs")  # infeasible() missed it
            self.usage.flush()  # before the journal: a node whose end is journaled has its usage record
            self._sync_in = self.journal.commit()  # writes this turn's events before waiting
            if self.cache is not None:
                self.cache.flush()
            self.reporter.flush()
            if self._stops_handled == 0 and (gather := self._gather_s()):
                time.sleep(gather)
            self._wait()

        state = RUN_INTERRUPTED if self._stops_handled else RUN_FAILED if self.failures else RUN_SUCCEEDED
        self.usage.flush()
        self.journal.write({"e": "finish", "s": state}, durable=True)
        self.journal.flush()
        states = {name: self.states.get(name, PENDING) for name in self.plan.nodes}
        for name, node_state in states.items():
            if node_state in (RETRYING, CHECKPOINTED):  # stopped before its next attempt
                states[name] = INTERRUPTED
        result = RunResult(
            run_id=self.layout.run_id,
            run_dir=self.layout.run_dir,
            state=state,
            states=states,
            duration_s=time.monotonic() - t0,
            failures=self.failures,
            resumed_done=len(done),
        )
        self.reporter.run_finished(result)
        return result

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

    def _forced_nodes(self) -> set[str]:
        if not self.options.force:
            return set()
        wanted = set(self.options.force)
        forced = {name for name, node in self.plan.nodes.items() if name in wanted or node.step in wanted}
        children = self.tracker.children
        stack = list(forced)
        while stack:
            for child in children[stack.pop()]:
                if child not in forced:
                    forced.add(child)
                    stack.append(child)
        return forced

    # --- what an earlier runner left ----------------------------------------------------------------

    def _recover(self, prior: JournalState, done: set[str]) -> tuple[dict[str, ProcEntry], dict[str, ProcEntry]]:
        """Sort the processes earlier runners started and did not journal as finished: still running and
        adoptable, exited with a recorded result, or lost (killed here, and rerun)."""
        adopt: dict[str, ProcEntry] = {}
        accept: dict[str, ProcEntry] = {}
        lost: list[tuple[int, str]] = []
        handled: set[int] = set()
        run_id, run_dir = self.layout.run_id, self.layout.run_dir
        for name, entry in read_procs(self.layout.procs_path).items():
            record = prior.nodes.get(name)
            handled.add(entry.pid)
            if record is not None and record.pid == entry.pid and record.state != RUNNING:
                continue  # its end is journaled
            node = self.plan.nodes.get(name)
            # (a node of a re-planned run that changed, or lost its place, is not taken over)
            wanted = node is not None and name not in done and name not in self.forget
            wanted = wanted and all(parent in done for parent in node.parents)
            if entry.rc is not None:  # exited, and its keeper killed its process group
                if wanted:
                    accept[name] = entry
            elif not wanted:
                lost.append((entry.pid, name))
            elif held_by_keeper(entry.pid, run_dir):  # its keeper (or warden) lives and has not reaped it
                adopt[name] = entry
            elif not keeper_alive(entry.keeper, run_dir):
                lost.append((entry.pid, name))  # nothing can record its exit any more
            else:  # it has just exited: its keeper is about to record how
                entry.rc = self._recorded_exit(name, entry.pid, entry.keeper)
                if entry.rc is None:
                    lost.append((entry.pid, name))
                else:
                    accept[name] = entry
        # Nodes started by a dagflow from before the keeper (or whose record is lost) are killed, and rerun.
        lost += [
            (record.pid, name)
            for name, record in prior.nodes.items()
            if record.state == RUNNING and record.pid and record.pid not in handled
        ]
        if lost:
            kill_orphans(lost, run_id, self.options.kill_grace_s)
        return adopt, accept

    def _take_over(
        self, name: str, entry: ProcEntry, record: NodeRecord | None, gpus: tuple[Gpu, ...] | None
    ) -> _Running:
        """A _Running for a node an earlier runner started; journals its start if that runner could not."""
        node = self.plan.nodes[name]
        self.attempts[name] = entry.attempt
        self.failed_tries[name] = max(0, entry.attempt - 1 - self.restarts.get(name, 0))
        if self.cache is not None:
            self.keys[name] = self.cache.key(self.plan, node, [self.keys.get(p, p) for p in node.parents])
        if record is None or record.pid != entry.pid:
            self.journal.write({"e": "start", "n": name, "a": entry.attempt, "pid": entry.pid})
        running = _Running(
            name, self.plan.steps[node.step], entry.attempt, time.monotonic(), gpus or (), pid=entry.pid,
            res=self.plan.steps[node.step].resources if gpus is not None else None,
            holds=gpus is not None, adopted=True, keeper=entry.keeper,
        )
        self.running[name] = running
        self.states[name] = RUNNING
        return running

    def _accept(self, name: str, entry: ProcEntry, record: NodeRecord | None) -> None:
        """A node that exited while no runner was alive: its recorded exit is its result."""
        running = self._take_over(name, entry, record, None)
        running.measured = Measured.of(entry.usage)
        rc = entry.rc if entry.rc is not None else -1
        self._finished(running, rc, describe_exit(rc) if rc else None)

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
        if not _HAS_PIDFD:
            return
        try:
            running.pidfd = os.pidfd_open(entry.pid)
        except ProcessLookupError:  # it exited a moment ago
            self._adopted_exited(running)
        else:
            self.selector.register(running.pidfd, selectors.EVENT_READ, running)

    def _adopted_exited(self, running: _Running) -> None:
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

    # --- scheduling ---------------------------------------------------------------------------------

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
                self.journal.write({"e": "cached", "n": name, "k": key}, durable=True)
                self.reporter.node_cached(name)
                stack.extend(reversed(self.tracker.succeeded(name)))
            else:
                self.tracker.push(name)

    def _start_ready(self) -> None:
        jobs = self.jobs
        for step, queue in self.tracker.queues:
            while queue and self._slots_taken() < jobs:
                res = self.memory.resources(queue[0], step)
                gpus = self.pool.acquire(res)
                if gpus is None:
                    break
                self._launch(queue.popleft(), step, res, gpus, None)
            if self._slots_taken() >= jobs:
                break
        if self._following and self._slots_taken() < jobs:
            self._start_followers_now()
        if self.tracker.has_ready():
            self._add_followers()

    def _slots_taken(self) -> int:
        """Nodes holding a slot: running, or sent to start now (followers still waiting hold none)."""
        return len(self.running) - self._following

    def _detach(self, follower: _Running) -> None:
        """follower no longer waits for its leader: it started in the leader's slot, starts now in a slot
        of its own, or ended without starting."""
        leader = follower.leader
        assert leader is not None
        follower.leader = leader.follower = None
        self._following -= 1

    def _add_followers(self) -> None:
        """Queue ready nodes behind each node of ours that runs, to start in its slot (keeper.py): the
        first ready node (in the order _start_ready takes them) that fits in what the one before it
        holds, as deep as queueing.py allows."""
        for leader in list(self.running.values()):
            if leader.follower is not None or leader.adopted or leader.res is None or leader.kill_reason is not None:
                continue  # the end of a queue; an adopted node's keeper is not ours
            depth, queued_s, ahead = 0, 0.0, leader
            while ahead.leader is not None:
                depth, queued_s, ahead = depth + 1, queued_s + self.queueing.typical_s(ahead.step.name), ahead.leader
            while (follower := self._follower_for(leader, depth, queued_s)) is not None:
                leader, depth = follower, depth + 1  # the queue behind a slot fills up in one turn
                queued_s += self.queueing.typical_s(follower.step.name)

    def _follower_for(self, leader: _Running, depth: int, queued_s: float) -> _Running | None:
        """Launch the first ready node that fits in what leader holds as its follower, if it may join a
        queue depth deep holding queued_s of expected work; None if none does."""
        for step, queue in self.tracker.queues:
            if queue and within(res := self.memory.resources(queue[0], step), leader.res):
                if not self.queueing.may_queue(depth, queued_s, step.name):
                    return None
                name = queue.popleft()
                self._launch(name, step, res, (), leader)
                follower = self.running.get(name)
                return follower if follower is not None and follower.leader is leader else None
        return None

    def _gather_s(self) -> float:
        """How long the keeper's replies may gather before the next turn (queueing.py): none while a node
        of ours runs with no follower behind it."""
        least = math.inf
        for running in self.running.values():
            if running.leader is not None or running.adopted:
                continue  # not the head of a slot's queue
            queued_s, behind = 0.0, running.follower
            while behind is not None and queued_s < least:
                queued_s, behind = queued_s + self.queueing.typical_s(behind.step.name), behind.follower
            least = min(least, queued_s)
        return self.queueing.gather_s(least) if self.running and least < math.inf else 0.0

    def _start_followers_now(self) -> None:
        """A slot is free and nothing ready is left to fill it: a follower waiting behind a node that runs
        on (a leader may run for hours) starts now instead, on resources of its own."""
        for follower in list(self.running.values()):
            if self._slots_taken() >= self.jobs:
                return
            if follower.leader is None or follower.pid is not None or follower.pending_signal is not None:
                continue
            assert follower.res is not None
            if self.pool.acquire(follower.res) is None:
                continue
            self._detach(follower)
            follower.holds = True
            self._outbox.append(request("n", follower.name, follower.attempt))

    def _launch(
        self, name: str, step: StepInfo, res: Resources, gpus: tuple[Gpu, ...], leader: _Running | None
    ) -> None:
        node: Node = self.plan.nodes[name]
        attempt = self.attempts.get(name, 0) + 1
        self.attempts[name] = attempt
        env = dict(node.env)  # what the keeper adds to the run's environment
        env["DAGFLOW_NODE"] = name
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu.index for gpu in gpus)
        if node.argv and node.argv[0] == DAGFLOW_LAUNCHER and "PYTHONPATH" not in env and "PYTHONPATH" in self._env:
            env["PYTHONPATH"] = self._env["PYTHONPATH"]
        argv = command_for(step.runtime.argv(node.argv), env)  # runtime.python: what `python` means
        running = _Running(name, step, attempt, time.monotonic(), gpus, res, holds=leader is None)
        self.running[name] = running
        self.states[name] = RUNNING
        try:
            argv = with_gpu_memory(argv, env, gpus)
            program = resolve_program(argv[0], env.get("PATH") or self._env["PATH"], self.workdir)
        except GpuMemoryUnknownError as error:
            self._cannot_start(running, argv[0], str(error))
            return
        except OSError as error:
            self._cannot_start(running, argv[0], error.strerror or str(error))
            return
        after = (leader.name, leader.attempt) if leader is not None else None
        try:
            message = request("s", name, attempt, (program, argv, env, after))
        except ValueError as error:  # a NUL byte, which exec(2) cannot pass
            self._cannot_start(running, argv[0], str(error))
            return
        if leader is not None:
            running.leader, leader.follower = leader, running
            self._following += 1
        self._outbox.append(message)

    def _started(self, running: _Running, pid: int) -> None:
        """The keeper started it (at once, or as a follower when its leader exited)."""
        name, attempt, step = running.name, running.attempt, running.step
        running.pid = pid
        running.started = now = time.monotonic()
        devices = tuple(gpu.index for gpu in running.gpus)
        self.usage.started(name, devices, None)
        self.usage.pid_known(name, pid)
        # Journaled this turn (its keeper has recorded it in procs.jsonl already).
        self.journal.write({"e": "start", "n": name, "a": attempt, "pid": pid})
        if running.pending_signal is not None:
            kill_group(pid, running.pending_signal)
        if step.timeout_s:
            self._add_timer(now + step.timeout_s, "timeout", name, attempt)
        if memory_enforced(step):
            self._add_timer(now + MEMORY_CHECK_S, "memory", name, attempt)
        self.reporter.node_started(name, attempt, devices)

    def _cannot_start(self, running: _Running, program: str, error: str) -> None:
        why = f"cannot start {program!r}: {error}"
        path = self.layout.stderr_path(running.name)
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if running.attempt > 1 else os.O_TRUNC)
        fd = os.open(path, flags, 0o644)
        try:
            banner = f"\n=== dagflow: attempt {running.attempt} ===\n" if os.fstat(fd).st_size else ""
            os.write(fd, f"{banner}dagflow: {why}\n".encode())
        finally:
            os.close(fd)
        self._finished(running, 127, why)

    def _send_requests(self) -> None:
        data = b"".join(self._outbox)
        self._outbox.clear()
        while data:
            try:
                data = data[os.write(self._requests_w, data) :]
            except BrokenPipeError:
                raise KeeperLostError(f"the keeper of run {self.layout.run_id} died; resume the run") from None

    def _add_timer(self, when: float, kind: str, name: str, attempt: int) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), kind, name, attempt))

    # --- waiting ------------------------------------------------------------------------------------

    def _wait(self) -> None:
        now = time.monotonic()
        tick = self.reporter.tick_interval
        # Wake up for whichever comes first: the journal's next sync (if it has events waiting), a
        # progress tick, the nearest timer, a poll of adopted nodes.
        waits = [self._sync_in, tick, self.usage.sampler.due_in(now), self.reaper.due_in(now)]
        if self._timers:
            waits.append(self._timers[0][0] - now)
        polling = not _HAS_PIDFD and any(running.adopted for running in self.running.values())
        if polling:
            waits.append(_FALLBACK_POLL_S)
        due = [wait for wait in waits if wait is not None]
        timeout = min(max(0.0, min(due)), _LONGEST_WAIT_S) if due else None
        for key, _ in self.selector.select(timeout):
            data = key.data
            if data is _KEEPER:
                self._read_replies()
            elif data is None:
                self._drain_wakeups()
            elif self.running.get(data.name) is data:
                self._adopted_exited(data)
        if polling:
            run_id = self.layout.run_id
            for running in list(self.running.values()):
                if running.adopted and not node_alive(running.pid or 0, run_id, running.name):
                    self._adopted_exited(running)
        if self.reaper.due_in(time.monotonic()) == 0.0:  # nodes ended: before a retry of one starts
            self.reaper.sweep({name: running.pid for name, running in self.running.items()})
        if self._timers:
            self._fire_timers(time.monotonic())
        self.usage.sampler.maybe_sample(time.monotonic())
        if tick is not None:
            self.reporter.tick()

    def _read_replies(self) -> None:
        buffer = self._replies
        while True:
            try:
                chunk = os.read(self._replies_r, 1 << 16)
            except BlockingIOError:
                break
            if not chunk:
                self.selector.unregister(self._replies_r)
                raise KeeperLostError(f"the keeper of run {self.layout.run_id} died; resume the run")
            buffer += chunk
        running_nodes = self.running
        for kind, name, attempt, value in read_replies(buffer):
            running = running_nodes.get(name)
            if running is None or running.attempt != attempt or running.adopted:
                continue
            if kind == "x":
                self.queueing.observed(running.step.name, value[1])
                running.measured = Measured.from_reply(value)
                self._exited(running, value[0])
            elif kind == "s":
                self._started(running, value)
            elif kind == "d":  # a follower dropped before it started (the run is stopping)
                running.kill_reason = running.kill_reason or "interrupt"
                self._exited(running, -signal.SIGTERM)
            else:
                self._cannot_start(running, self.plan.nodes[name].argv[0], value)

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass
        if self._stop_requests > self._stops_handled:
            first = self._stops_handled == 0
            self._stops_handled = self._stop_requests
            # Followers still waiting are dropped first, and the drops written before any leader is
            # signalled: a leader that dies before its keeper has read the drop would start its follower.
            waiting = [running for running in self.running.values() if running.leader is not None]
            others = [running for running in self.running.values() if running.leader is None]
            for group in (waiting, others):
                for running in group:
                    if first:
                        self._terminate(running, "interrupt")
                    else:
                        self._signal(running, signal.SIGKILL)
                if self._outbox:
                    self._send_requests()

    def _signal(self, running: _Running, sig: int) -> None:
        if running.pid is None:
            running.pending_signal = sig  # for when the keeper's news of its start comes
            if running.leader is not None:  # still waiting for its leader: the keeper drops it
                self._outbox.append(request("d", running.name, running.attempt))
        else:
            kill_group(running.pid, sig)

    def _terminate(self, running: _Running, reason: str) -> None:
        first = running.kill_reason is None
        running.kill_reason = reason
        if first:
            self._signal(running, signal.SIGTERM)
            self._add_timer(time.monotonic() + self.options.kill_grace_s, "kill", running.name, running.attempt)

    def _fire_timers(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, kind, name, attempt = heapq.heappop(timers)
            running = self.running.get(name)
            if running is None or running.attempt != attempt:
                continue
            if kind == "timeout":
                self._terminate(running, "timeout")
            elif kind == "memory":
                self._check_memory(running, now)
            else:
                self._signal(running, signal.SIGKILL)

    def _check_memory(self, running: _Running, now: float) -> None:
        """Kill a node over its memory limit (memory_limit.py); check again later otherwise."""
        if running.kill_reason is not None or running.pid is None:
            if running.kill_reason is None:
                self._add_timer(now + MEMORY_CHECK_S, "memory", running.name, running.attempt)
            return
        used = group_rss_mb(running.pid)
        if used > self.memory.limit(running.name, running.step):
            running.kill_reason = "oom"
            self.memory.peaks[running.name] = used
            self._signal(running, signal.SIGKILL)
        else:
            self._add_timer(now + MEMORY_CHECK_S, "memory", running.name, running.attempt)

    # --- finishing ----------------------------------------------------------------------------------

    def _exited(self, running: _Running, rc: int) -> None:
        why = None
        if running.kill_reason == "timeout":
            why = f"timed out after {running.step.timeout_s}s"
        elif running.kill_reason == "interrupt":
            why = "interrupted"
        elif running.kill_reason == "oom" or (
            running.kill_reason is None and rc == -signal.SIGKILL and memory_enforced(running.step)
        ):  # a SIGKILL nobody here sent: the kernel's OOM killer
            running.kill_reason = "oom"
            limit = self.memory.limit(running.name, running.step)
            peak = self.memory.peaks.get(running.name)
            why = f"out of memory: over its {limit} MB limit" + (f" ({peak:.0f} MB resident)" if peak else "")
        elif rc != 0:
            why = describe_exit(rc)
        self._finished(running, rc, why)

    def _free(self, running: _Running) -> None:
        """Give back a finished node's slot and resources, or hand them to its follower."""
        del self.running[running.name]
        if running.leader is not None:  # ended while waiting for its leader (dropped, or could not start)
            self._detach(running)
        if running.holds:
            assert running.res is not None
            self.pool.release(running.res, running.gpus)
            running.holds = False
        follower = running.follower
        if follower is not None:  # the keeper started it the moment this one exited
            self._detach(follower)
            assert follower.res is not None
            self.pool.take(follower.res)
            follower.holds = True

    def _checkpointed(self, running: _Running, rc: int) -> bool:
        """The node exited with its step's checkpoint code, by itself, and may restart once more."""
        step = running.step
        return (
            step.checkpoint_exit_code is not None
            and rc == step.checkpoint_exit_code
            and running.kill_reason is None
            and self.restarts.get(running.name, 0) < step.checkpoint_max_restarts
        )

    def _finished(self, running: _Running, rc: int, why: str | None) -> None:
        name, step, attempt = running.name, running.step, running.attempt
        if self.running.get(name) is running:
            self._free(running)
        self.reaper.node_ended()
        keeper = running.keeper if running.adopted else self.keeper.pid if self.keeper else None
        devices = tuple(gpu.index for gpu in running.gpus)
        key = attempt_key(keeper, running.pid)  # None: it never started, and gets no usage record
        resources = self.memory.resources(name, step)  # what this attempt asked (before any growth)
        self.usage.finished(
            name, step.name, attempt, resources, devices, running.measured, key, rc, running.kill_reason
        )
        duration = time.monotonic() - running.started
        event = {"e": "end", "n": name, "a": attempt, "s": SUCCEEDED, "rc": rc}
        if rc == step.checkpoint_exit_code and running.kill_reason is None and not self._checkpointed(running, rc):
            why = f"exit code {rc} after {self.restarts.get(name, 0)} checkpoint restarts (checkpoint.max_restarts)"
        if running.kill_reason == "interrupt":
            state = INTERRUPTED
        elif why is None:
            state = SUCCEEDED
        elif self._checkpointed(running, rc):
            state = CHECKPOINTED
            self.restarts[name] = self.restarts.get(name, 0) + 1
            why = f"checkpointed (exit code {rc}): restart {self.restarts[name]} of {step.checkpoint_max_restarts}"
        elif running.kill_reason == "oom" and not self._stops_handled:
            grown = self.memory.grow(name, step)
            if grown:  # runs again with more memory: not a failed try that `retries` counts
                state = "retry"
                self.failed_tries[name] = self.failed_tries.get(name, 0) - 1
                why = f"{why}; again with {grown} MB (memory_max {step.resources.memory_max_mb} MB)"
            else:
                state = FAILED
                why = f"{why}, at its memory_max"
        elif (
            self.failed_tries.get(name, 0) < step.retries
            and not self._stops_handled
            and not (running.kill_reason is None and rc >= 0 and rc in step.retry_unless_exit)
        ):
            state = "retry"
        else:
            state = FAILED
        event["s"] = state
        if why:
            event["why"] = why
        key = self.keys.get(name)
        if state == SUCCEEDED and key:
            event["k"] = key
        self.journal.write(event, durable=True)
        tries = self.failed_tries.get(name, 0) + 1  # restarts from a checkpoint are the same attempt
        self.reporter.node_finished(name, state, tries, rc, why, duration)
        if state == SUCCEEDED:
            self.states[name] = SUCCEEDED
            if key and self.cache is not None:
                self.cache.record(key, self.plan, self.plan.nodes[name])
            self._release(self.tracker.succeeded(name))
        elif state == "retry":
            self.failed_tries[name] = self.failed_tries.get(name, 0) + 1
            self.states[name] = RETRYING
            self.tracker.push(name, front=True)
        elif state == CHECKPOINTED:  # its checkpoint files stay where it wrote them; it starts again from them
            self.states[name] = CHECKPOINTED
            if not self._stops_handled:
                self.tracker.push(name, front=True)
        elif state == INTERRUPTED:
            self.states[name] = INTERRUPTED
        else:
            self.states[name] = FAILED
            log = self.layout.failure_log(name)
            self.failures.append(Failure(name, why or describe_exit(rc), self.failed_tries.get(name, 0) + 1, log))
            blocked = self.tracker.failed(name)
            if blocked:
                for child in blocked:
                    self.states[child] = UPSTREAM_FAILED
                self.journal.write({"e": "upstream_failed", "n": blocked, "by": name}, durable=True)
                self.reporter.nodes_blocked(blocked, name)
