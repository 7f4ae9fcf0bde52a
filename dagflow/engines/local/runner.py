"""The local runner: one event loop that runs a plan's nodes as processes on this machine.

The loop waits on one selector holding, per running node, a pidfd (readable when it exits) and, once
the node has run 50 ms, its stdout and stderr pipes, plus a self-pipe for stop requests, with a timeout
set by the nearest timer (node timeouts, SIGKILL escalations, progress ticks, the journal's next sync).
It does not poll (except on kernels without pidfds) and starts no thread. Exits are journaled at once;
the journal fdatasyncs them in groups (journal.py).

Nodes are started with posix_spawn, which cannot change directory: the runner moves into the plan's
workdir for the length of `run()` (every path it keeps is absolute) and moves back after, so a program
embedding it must not rely on its working directory from other threads meanwhile, nor run two runners
with different workdirs in threads of one process at once (the engine runs each background run as its
own process).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import selectors
import signal
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from dagflow.engines.local.cache import NodeCache
from dagflow.engines.local.graph import DagTracker
from dagflow.engines.local.options import (
    RUN_FAILED,
    RUN_INTERRUPTED,
    RUN_SUCCEEDED,
    Failure,
    RunOptions,
    RunResult,
)
from dagflow.engines.local.output import NodeOutput
from dagflow.engines.local.procs import Child, command_for, kill_group, kill_orphans, spawn, with_interpreter_on_path
from dagflow.engines.local.reporting import Reporter, RunInfo
from dagflow.engines.local.resources import Gpu, Machine, ResourcePool
from dagflow.plan import Node, Plan, StepInfo
from dagflow.run.journal import (
    CACHED,
    FAILED,
    INTERRUPTED,
    PENDING,
    RETRYING,
    RUNNING,
    SUCCEEDED,
    UPSTREAM_FAILED,
    JournalWriter,
    read_journal,
)
from dagflow.run.layout import RunLayout
from dagflow.run.lock import RunLock

_HAS_PIDFD = hasattr(os, "pidfd_open")
_DUP2 = os.POSIX_SPAWN_DUP2
_FALLBACK_POLL_S = 0.02  # without pidfds (not Linux) exits are found by polling at this interval
# A node's output pipes are watched only once it has run this long; a shorter node's output is read
# when it exits. Most nodes of a big DAG are short, and watching costs four epoll calls and two
# wakeups per node; a chatty short node at worst waits this long on a full pipe.
_WATCH_OUTPUT_AFTER_S = 0.05


@dataclass(slots=True)
class _Running:
    name: str
    step: StepInfo
    proc: Child | None
    pidfd: int | None
    attempt: int
    started: float  # monotonic
    gpus: tuple[Gpu, ...]
    output: NodeOutput | None
    kill_reason: str | None = None  # "timeout" or "interrupt" once the runner has sent SIGTERM
    watched: bool = False  # its output pipes are in the selector


def describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"


class LocalRunner:
    """Runs (or resumes) the run in `layout` until every node has finished or the run is stopped.

    `request_stop()` may be called from another thread or a signal handler: running nodes get SIGTERM,
    then SIGKILL after `kill_grace_s`; a second request kills them at once.
    """

    def __init__(self, plan: Plan, layout: RunLayout, machine: Machine, options: RunOptions) -> None:
        self.plan = plan
        self.layout = RunLayout(layout.runs_dir.absolute(), layout.run_id)  # the runner changes directory
        self.options = options
        self.jobs = options.jobs or machine.cpus
        self.pool = ResourcePool(machine, self.jobs)
        self.reporter = options.reporter or Reporter()
        self.workdir = os.path.realpath(plan.workdir)
        self.running: dict[str, _Running] = {}
        self.states: dict[str, str] = {}
        self.keys: dict[str, str] = {}
        self.attempts: dict[str, int] = {}
        self.failures: list[Failure] = []
        self._timers: list[tuple[float, int, str, str, int]] = []  # (when, seq, kind, node, attempt)
        self._seq = itertools.count()
        self._sync_in: float | None = None  # seconds until the journal wants commit() again
        self._unwatched: deque[_Running] = deque()  # started nodes whose output is not watched yet, oldest first
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
        except BaseException:
            self._close_wake_pipe()
            lock.release()
            raise
        restore = self._install_signal_handlers()
        self.cache = (
            NodeCache(Path(self.options.cache_dir or self.layout.cache_dir).absolute(), Path(self.workdir))
            if self.options.use_cache
            else None
        )
        self.logs_dir = str(self.layout.logs_dir)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            previous_cwd = os.getcwd()
        except OSError:  # it was removed
            previous_cwd = None
        try:
            os.chdir(self.workdir)  # nodes run here (posix_spawn cannot change directory)
            return self._run()
        finally:
            if previous_cwd is not None:
                with contextlib.suppress(OSError):
                    os.chdir(previous_cwd)
            for running in list(self.running.values()):  # only after an unexpected error
                if running.proc is not None:
                    kill_group(running.proc.pid, signal.SIGKILL)
            self.journal.close()
            if self.cache is not None:
                self.cache.close()
            self.selector.close()
            os.close(self._devnull)
            self._close_wake_pipe()
            restore()
            lock.release()

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
        orphans = [
            (record.pid, name)
            for name, record in prior.nodes.items()
            if record.state in (RUNNING, RETRYING) and record.pid
        ]
        if orphans:
            kill_orphans(orphans, self.layout.run_id, self.options.kill_grace_s)
        done = {name for name in prior.done() if name in self.plan.nodes}
        for name in done:
            self.states[name] = prior.nodes[name].state
            key = prior.nodes[name].key
            if key:
                self.keys[name] = key
        self.journal.write({"e": "run", "pid": os.getpid(), "resume": prior.runners > 0}, durable=True)
        self.journal.flush()
        self.tracker = DagTracker(self.plan, done)
        self.forced = self._forced_nodes()
        self._env = dict(os.environ)
        self._env["PATH"] = with_interpreter_on_path(self._env.get("PATH", ""))
        self._env["DAGFLOW_RUN_ID"] = self.layout.run_id
        self._env["DAGFLOW_RUN_DIR"] = str(self.layout.run_dir)
        self.reporter.run_started(
            RunInfo(self.plan, self.layout.run_id, self.layout.run_dir, self.jobs, prior.runners > 0, done)
        )
        self._release(self.tracker.initially_ready())
        self._sync_in = self.journal.commit()
        while True:
            if self._stops_handled == 0:
                self._start_ready()
            if not self.running:
                if self._stops_handled or not self.tracker.has_ready():
                    break
                raise RuntimeError("ready nodes fit nowhere although nothing runs")  # infeasible() missed it
            self._wait()
            self._sync_in = self.journal.commit()

        state = RUN_INTERRUPTED if self._stops_handled else RUN_FAILED if self.failures else RUN_SUCCEEDED
        self.journal.write({"e": "finish", "s": state}, durable=True)
        self.journal.flush()
        states = {name: self.states.get(name, PENDING) for name in self.plan.nodes}
        for name, node_state in states.items():
            if node_state == RETRYING:  # stopped before its next attempt
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
            if name not in self.forced and cache.hit(key, node):
                self.states[name] = CACHED
                self.journal.write({"e": "cached", "n": name, "k": key}, durable=True)
                self.reporter.node_cached(name)
                stack.extend(reversed(self.tracker.succeeded(name)))
            else:
                self.tracker.push(name)

    def _start_ready(self) -> None:
        jobs = self.jobs
        for step, queue in self.tracker.queues:
            if len(self.running) >= jobs:
                return
            while queue and len(self.running) < jobs:
                gpus = self.pool.acquire(step.resources)
                if gpus is None:
                    break
                self._launch(queue.popleft(), step, gpus)

    def _launch(self, name: str, step: StepInfo, gpus: tuple[Gpu, ...]) -> None:
        node: Node = self.plan.nodes[name]
        attempt = self.attempts.get(name, 0) + 1
        self.attempts[name] = attempt
        env = self._env.copy()
        env.update(node.env)
        env["DAGFLOW_NODE"] = name
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu.index for gpu in gpus)
        argv = command_for(node.argv, env)
        now = time.monotonic()
        output = NodeOutput(self.logs_dir, name, attempt)
        out_w, err_w = output.write_fds
        actions = [(_DUP2, self._devnull, 0), (_DUP2, out_w, 1), (_DUP2, err_w, 2)]
        try:
            proc = spawn(argv, env, actions)
        except OSError as error:
            why = f"cannot start {argv[0]!r}: {error.strerror or error}"
            output.write(1, f"dagflow: {why}\n".encode())
            output.close()
            running = _Running(name, step, None, None, attempt, now, gpus, None)
            self.running[name] = running
            self.states[name] = RUNNING
            self._finished(running, 127, why)
            return
        finally:
            output.close_write_ends()
        pid = proc.pid
        # Written before anything else can happen, so a runner killed from here on leaves a record
        # of this process for the next runner to clean up (found again by its pid and environment).
        self.journal.write({"e": "start", "n": name, "a": attempt, "pid": pid})
        running = _Running(name, step, proc, None, attempt, now, gpus, output)
        self._unwatched.append(running)
        if _HAS_PIDFD:
            try:
                running.pidfd = os.pidfd_open(pid)
            except OSError:  # a kernel older than 5.3: this node's exit is found by polling
                pass
            else:
                self.selector.register(running.pidfd, selectors.EVENT_READ, running)
        self.running[name] = running
        self.states[name] = RUNNING
        if step.timeout_s:
            self._add_timer(now + step.timeout_s, "timeout", name, attempt)
        self.reporter.node_started(name, attempt, tuple(gpu.index for gpu in gpus))

    def _add_timer(self, when: float, kind: str, name: str, attempt: int) -> None:
        heapq.heappush(self._timers, (when, next(self._seq), kind, name, attempt))

    # --- waiting ------------------------------------------------------------------------------------

    def _wait(self) -> None:
        now = time.monotonic()
        tick = self.reporter.tick_interval
        # Wake up for whichever comes first: the journal's next sync (if it has events waiting), a
        # progress tick, the nearest timer, the next node whose output is due to be watched, a poll.
        waits = [self._sync_in, tick]
        if self._timers:
            waits.append(self._timers[0][0] - now)
        if self._unwatched:
            waits.append(self._unwatched[0].started + _WATCH_OUTPUT_AFTER_S - now)
        polling = not _HAS_PIDFD or any(running.pidfd is None for running in self.running.values())
        if polling:
            waits.append(_FALLBACK_POLL_S)
        due = [wait for wait in waits if wait is not None]
        timeout = max(0.0, min(due)) if due else None
        for key, _ in self.selector.select(timeout):
            data = key.data
            if data is None:
                self._drain_wakeups()
            elif type(data) is tuple:
                running, stream = data
                output = running.output
                # (an exit handled earlier in this batch has already drained and closed this pipe)
                if output.read_fds[stream] == key.fd and not output.pump(stream):
                    self.selector.unregister(key.fd)
                    output.close_stream(stream)
            elif self.running.get(data.name) is data:
                rc = data.proc.poll()
                if rc is not None:
                    self._exited(data, rc)
        if polling:
            for running in list(self.running.values()):
                if running.pidfd is None and running.proc is not None:
                    rc = running.proc.poll()
                    if rc is not None:
                        self._exited(running, rc)
        if self._unwatched:
            self._watch_output(time.monotonic())
        if self._timers:
            self._fire_timers(time.monotonic())
        if tick is not None:
            self.reporter.tick()

    def _watch_output(self, now: float) -> None:
        """Put the output pipes of nodes that have run long enough into the selector."""
        unwatched = self._unwatched
        register = self.selector.register
        while unwatched and unwatched[0].started + _WATCH_OUTPUT_AFTER_S <= now:
            running = unwatched.popleft()
            if self.running.get(running.name) is not running:
                continue  # it has exited already
            running.watched = True
            for stream, fd in enumerate(running.output.read_fds):
                if fd >= 0:
                    register(fd, selectors.EVENT_READ, (running, stream))

    def _drain_wakeups(self) -> None:
        try:
            while os.read(self._wake_r, 512):
                pass
        except BlockingIOError:
            pass
        if self._stop_requests > self._stops_handled:
            first = self._stops_handled == 0
            self._stops_handled = self._stop_requests
            for running in list(self.running.values()):
                if first:
                    self._terminate(running, "interrupt")
                elif running.proc is not None:
                    kill_group(running.proc.pid, signal.SIGKILL)

    def _terminate(self, running: _Running, reason: str) -> None:
        if running.proc is None:
            return
        first = running.kill_reason is None
        running.kill_reason = reason
        if first:
            kill_group(running.proc.pid, signal.SIGTERM)
            self._add_timer(time.monotonic() + self.options.kill_grace_s, "kill", running.name, running.attempt)

    def _fire_timers(self, now: float) -> None:
        timers = self._timers
        while timers and timers[0][0] <= now:
            _, _, kind, name, attempt = heapq.heappop(timers)
            running = self.running.get(name)
            if running is None or running.attempt != attempt or running.proc is None:
                continue
            if kind == "timeout":
                self._terminate(running, "timeout")
            else:
                kill_group(running.proc.pid, signal.SIGKILL)

    # --- finishing ----------------------------------------------------------------------------------

    def _exited(self, running: _Running, rc: int) -> None:
        if running.pidfd is not None:
            self.selector.unregister(running.pidfd)
            os.close(running.pidfd)
        # Whatever the node left behind in its process group goes with it, as under HTCondor.
        kill_group(running.proc.pid, signal.SIGKILL)
        output = running.output
        if running.watched:
            for fd in output.read_fds:
                if fd >= 0:
                    self.selector.unregister(fd)
        output.close()
        why = None
        if running.kill_reason == "timeout":
            why = f"timed out after {running.step.timeout_s}s"
        elif running.kill_reason == "interrupt":
            why = "interrupted"
        elif rc != 0:
            why = describe_exit(rc)
        self._finished(running, rc, why)

    def _finished(self, running: _Running, rc: int, why: str | None) -> None:
        name, step, attempt = running.name, running.step, running.attempt
        del self.running[name]
        self.pool.release(step.resources, running.gpus)
        duration = time.monotonic() - running.started
        event = {"e": "end", "n": name, "a": attempt, "s": SUCCEEDED, "rc": rc}
        if running.kill_reason == "interrupt":
            state = INTERRUPTED
        elif why is None:
            state = SUCCEEDED
        elif (
            attempt <= step.retries
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
        self.reporter.node_finished(name, state, attempt, rc, why, duration)
        if state == SUCCEEDED:
            self.states[name] = SUCCEEDED
            if key and self.cache is not None:
                self.cache.record(key, name)
            self._release(self.tracker.succeeded(name))
        elif state == "retry":
            self.states[name] = RETRYING
            self.tracker.push(name, front=True)
        elif state == INTERRUPTED:
            self.states[name] = INTERRUPTED
        else:
            self.states[name] = FAILED
            log = self.layout.failure_log(name)
            self.failures.append(Failure(name, why or describe_exit(rc), attempt, log))
            blocked = self.tracker.failed(name)
            if blocked:
                for child in blocked:
                    self.states[child] = UPSTREAM_FAILED
                self.journal.write({"e": "upstream_failed", "n": blocked, "by": name}, durable=True)
                self.reporter.nodes_blocked(blocked, name)
