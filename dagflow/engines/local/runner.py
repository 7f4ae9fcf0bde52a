"""The local runner: one event loop that runs a plan's nodes as processes on this machine.

Nodes are started, waited for and recorded by the run's keeper (keeper.py), a small process that
outlives a killed runner: the runner sends it start requests and reads back, over one pipe, each node's
pid and later its exit. The loop waits on one selector holding that pipe, a self-pipe for stop requests
and, for nodes adopted from a runner that died, a pidfd each, with a timeout set by the nearest timer
(node timeouts, SIGKILL escalations, progress ticks, the journal's next sync). It does not poll (except
for adopted nodes on kernels without pidfds) and starts no thread. The events of each turn of the loop
are written to the journal with one write before it waits again; the journal fdatasyncs exits in groups
(journal.py).

This module is the loop, its setup and its shutdown; the rest of the runner is in parts with one job
each: the ready queue and resources (ready.py), the keeper link (keeper_link.py), recovery and adoption
of what earlier runners left (adoption.py, with recovery.py's rule), timers and limits (limits.py), and
what a node's start and end mean (outcomes.py). The parts that act on the runner's tables node by node
are mixins of LocalRunner, so the per-node path has no indirection; the keeper link and the timers own
their state and are reached through one attribute.

On a resume, a node the journal does not show finished is adopted when its process still runs, and its
recorded result is taken when it exited while no runner was alive (recovery.py says how they are sorted).

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
import os
import selectors
import signal
import threading
import time
from pathlib import Path

from dagflow.engines.jobs.cache import NodeCache
from dagflow.engines.jobs.release import Driving
from dagflow.engines.local.adoption import HAS_PIDFD, Adoption
from dagflow.engines.local.cpu_only import announce
from dagflow.engines.local.gpu_sampler import GpuSampler, NvmlReader
from dagflow.engines.local.keeper_link import KEEPER, KeeperLink, KeeperLostError
from dagflow.engines.local.limits import Limits
from dagflow.engines.local.memory_limit import MemoryGrowth
from dagflow.engines.local.node_reaper import NodeReaper
from dagflow.engines.local.open_files import nodes_within_open_files
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.outcomes import Outcomes
from dagflow.engines.local.procs import with_interpreter_on_path
from dagflow.engines.local.queueing import FollowerQueueing
from dagflow.engines.local.ready import ReadyQueue
from dagflow.engines.local.resources import Machine, ResourcePool
from dagflow.engines.local.running_node import RunningNode
from dagflow.engines.local.stop_channel import StopChannel
from dagflow.engines.local.usage_recorder import Measured, UsageRecorder
from dagflow.plan import Plan
from dagflow.run.journal import JournalWriter
from dagflow.run.layout import RunLayout
from dagflow.run.lock import RunLock
from dagflow.run.reporting import Reporter, RunInfo
from dagflow.run.result import Failure, RunResult
from dagflow.run.session import RunStorageError, disk_full

__all__ = ["KeeperLostError", "LocalRunner", "RunStorageError"]

_FALLBACK_POLL_S = 0.02  # adopted nodes without pidfds (not Linux) are watched by polling at this interval
_LONGEST_WAIT_S = 86400.0  # epoll refuses waits past INT_MAX ms (24.8 days): a long timeout wakes daily
STOP_CHANNEL = object()  # the selector's data for the stop channel's descriptor


class LocalRunner(ReadyQueue, Adoption, Outcomes, Driving):
    """Runs (or resumes) the run in `layout` until every node has finished or the run is stopped.

    `request_stop()` may be called from another thread or a signal handler: running nodes get SIGTERM,
    then SIGKILL after `kill_grace_s`; a second request kills them at once. The nodes an edit of the
    pipeline changed are in the journal (the run session's replan event), which every runner reads.
    """

    def __init__(self, plan: Plan, layout: RunLayout, machine: Machine, options: RunOptions) -> None:
        self.plan = plan
        self.layout = RunLayout(layout.runs_dir.absolute(), layout.run_id)  # as the keeper sees it, from the workdir
        self.options = options
        self.forget: frozenset[str] = frozenset()  # finished nodes whose files were edited since (adoption.py)
        self.jobs = nodes_within_open_files(options.jobs or machine.cpus)
        self.pool = ResourcePool(machine, self.jobs)
        self.memory = MemoryGrowth(machine.memory_mb)  # nodes' memory limits, grown after an overrun
        gpu_reader = NvmlReader.open() if machine.gpus else None
        self.usage = UsageRecorder(self.layout.run_dir, GpuSampler(gpu_reader), self.jobs)
        self.reporter = options.reporter or Reporter()
        self.workdir = os.path.realpath(plan.workdir)
        self.running: dict[str, RunningNode] = {}
        self.states: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.attempts: dict[str, int] = {}  # starts, restarts from a checkpoint included
        self.failed_tries: dict[str, int] = {}  # failed attempts (what retries count)
        self.restarts: dict[str, int] = {}  # checkpoint restarts over the whole run (what max_restarts caps)
        self.failures: list[Failure] = []
        self.link = KeeperLink(self.layout.run_id)
        self._keeper_pid: int | None = None
        self._outbox = self.link.outbox  # by its own name: launches append to it on the per-node path
        self.limits = Limits(self.running, self.link, self.memory, options.kill_grace_s)
        self._add_timer = self.limits.add
        self._sync_in: float | None = None  # seconds until the journal wants commit() again
        self._following = 0  # followers waiting in the keeper for their leader's exit (not holding a slot)
        self.queueing = FollowerQueueing()
        self._leave_running = False  # stopped for a full disk: nodes run on, a resume adopts them
        self._stop_requests = 0
        self._stops_handled = 0
        self._wake_r, self._wake_w = os.pipe()
        self._wake_lock = threading.RLock()
        self._channel: StopChannel | None = None
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)

    # --- public -------------------------------------------------------------------------------------

    def request_stop(self, *_: object) -> None:
        self._stop_requests += 1
        # Under the lock the pipe is closed with: a closed descriptor's number may be some other file's by now.
        # (Reentrant: a signal handler runs on the thread it interrupts, which may be closing the pipe.)
        with self._wake_lock:
            if self._wake_w >= 0:
                with contextlib.suppress(OSError):  # a full pipe already wakes the loop
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
            if disk_full(error):
                raise self._stop_for_storage(error) from None
            raise
        restore = self._install_signal_handlers(self.options.handle_signals)
        if self.pool.cpu_only:
            announce(self.plan, self.layout.run_dir)
        self.cache = (
            NodeCache(Path(self.options.cache_dir or self.layout.cache_dir).absolute(), Path(self.workdir))
            if self.options.use_cache and not self.pool.cpu_only  # a smoke test's results stand in for nothing
            else None
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._env = dict(os.environ)
        self._env["PATH"] = with_interpreter_on_path(self._env.get("PATH", ""))
        self._env["DAGFLOW_RUN_ID"] = self.layout.run_id
        self._env["DAGFLOW_RUN_DIR"] = str(self.layout.run_dir)
        self.reaper = NodeReaper.for_run(self.layout.run_id, self.layout.run_dir, self._env)
        try:
            if self.options.stop_channel:
                self._channel = StopChannel(self.layout.run_dir)
                self.selector.register(self._channel.fd, selectors.EVENT_READ, STOP_CHANNEL)
            self._keeper_pid = self.link.start(self.layout.run_dir, self.workdir, self._env, self.selector)
            self.reaper.contain(self._keeper_pid)  # before any node starts: each is born in the run's cgroup
            return self._run()
        except OSError as error:
            if not disk_full(error):
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
        started = sum(1 for running in self.running.values() if running.leader is None)
        return RunStorageError.stopped(self.layout, error, started)

    def _shut_down(self) -> None:
        """Close everything; after an unexpected error, kill what still runs."""
        if not self._leave_running:
            for running in list(self.running.values()):
                self.link.signal(running, signal.SIGKILL)
        for running in self.running.values():
            if running.pidfd is not None:
                os.close(running.pidfd)
        self.link.close(self._leave_running)  # the keeper exits once its nodes have
        if not self._leave_running:
            self.reaper.close()  # once the keeper has reaped every node
        with contextlib.suppress(OSError):
            self.usage.flush()
        self.usage.close()
        if self.cache is not None:  # before the journal, as _commit (jobs/release.py) writes them
            with contextlib.suppress(OSError):
                self.cache.close()
        with contextlib.suppress(OSError):
            self.journal.close()
        self.selector.close()
        if self._channel is not None:
            self._channel.close()
        self._close_wake_pipe()

    def _close_wake_pipe(self) -> None:
        with self._wake_lock:
            fds, self._wake_r, self._wake_w = (self._wake_r, self._wake_w), -1, -1
            for fd in fds:
                os.close(fd)

    # --- the loop -----------------------------------------------------------------------------------

    def _run(self) -> RunResult:
        t0 = time.monotonic()
        prior, done, adopt, accept = self._carry_over()
        self._journal_start(prior)
        self.journal.flush()
        info = RunInfo(self.plan, self.layout.run_id, self.layout.run_dir, self.jobs, prior.runners > 0, done)
        self._open(info, done, set(adopt) | set(accept), self.options.force)
        for name, entry in adopt.items():
            self._adopt(name, entry, prior.nodes.get(name))
        for name, entry in accept.items():
            self._accept(name, entry, prior.nodes.get(name))
        outbox, send = self._outbox, self.link.send
        while True:
            if self._stops_handled == 0:
                self._start_ready()
            if outbox:
                send()
            if not self.running:
                if self._stops_handled or not self.tracker.has_ready():
                    break
                raise RuntimeError("ready nodes fit nowhere although nothing runs")  # infeasible() missed it
            self.usage.flush()  # before the journal: a node whose end is journaled has its usage record
            self._sync_in = self._commit()  # writes this turn's cache entries and events before waiting
            self.reporter.flush()
            if self._stops_handled == 0 and (gather := self._gather_s()):
                time.sleep(gather)
            self._wait()
        self.usage.flush()  # before the journal's finish: every ended attempt has its usage record
        return self._result(t0, len(done), bool(self._stops_handled))

    def _wait(self) -> None:
        now = time.monotonic()
        tick = self.reporter.tick_interval
        timers = self.limits.timers
        # Wake up for whichever comes first: the journal's next sync (if it has events waiting), a
        # progress tick, the nearest timer, a poll of adopted nodes.
        waits = [self._sync_in, tick, self.usage.sampler.due_in(now), self.reaper.due_in(now)]
        if timers:
            waits.append(timers[0][0] - now)
        polling = not HAS_PIDFD and any(running.adopted for running in self.running.values())
        if polling:
            waits.append(_FALLBACK_POLL_S)
        due = [wait for wait in waits if wait is not None]
        timeout = min(max(0.0, min(due)), _LONGEST_WAIT_S) if due else None
        for key, _ in self.selector.select(timeout):
            data = key.data
            if data is KEEPER:
                self._read_replies()
            elif data is None:
                self._drain_wakeups()
            elif data is STOP_CHANNEL:
                self._stop_requests += self._channel.take()  # type: ignore[union-attr]
                self._drain_wakeups()
            elif self.running.get(data.name) is data:
                self._adopted_exited(data)
        if polling:
            self._poll_adopted()
        if self.reaper.due_in(time.monotonic()) == 0.0:  # nodes ended: before a retry of one starts
            self.reaper.sweep({name: running.pid for name, running in self.running.items()})
        if timers:
            self.limits.fire(time.monotonic())
        self.usage.sampler.maybe_sample(time.monotonic())
        if tick is not None:
            self.reporter.tick()

    def _read_replies(self) -> None:
        running_nodes = self.running
        for kind, name, attempt, value in self.link.read():
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
                self._dropped(running)
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
            self.limits.stop(first)
