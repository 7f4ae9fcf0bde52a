"""The ready queue and resources: which ready nodes start, in which slot, on which resources, and what a
finished node gives back. Cached nodes are skipped as they become ready; a node that fits in what a
running node holds may queue behind it in the keeper, as its follower (keeper.py, queueing.py).

A mixin of LocalRunner (runner.py), on the runner's own tables: no indirection on the per-node path.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from dagflow.engines.jobs.graph import DagTracker
from dagflow.engines.jobs.release import Release
from dagflow.engines.local.gpu_memory import GpuMemoryUnknownError, with_gpu_memory
from dagflow.engines.local.keeper import request
from dagflow.engines.local.memory_limit import MemoryGrowth
from dagflow.engines.local.options import RunOptions
from dagflow.engines.local.procs import command_for, resolve_program
from dagflow.engines.local.queueing import FollowerQueueing
from dagflow.engines.local.resources import Gpu, ResourcePool, within
from dagflow.engines.local.running_node import RunningNode
from dagflow.plan import DAGFLOW_LAUNCHER, Node, Plan, Resources, StepInfo
from dagflow.run.journal import PENDING, RUNNING


class ReadyQueue(Release):
    """Starting ready nodes and freeing what finished ones held (releasing them: release.py). Uses the
    runner's attributes below and its `_cannot_start` (outcomes.py)."""

    plan: Plan
    options: RunOptions
    jobs: int
    pool: ResourcePool
    memory: MemoryGrowth
    queueing: FollowerQueueing
    tracker: DagTracker
    workdir: str
    running: dict[str, RunningNode]
    states: dict[str, str]
    attempts: dict[str, int]
    _env: dict[str, str]
    _outbox: list[bytes]  # the keeper link's outbox (keeper_link.py)
    _following: int  # followers waiting in the keeper for their leader's exit (not holding a slot)
    _cannot_start: Callable[[RunningNode, str, str], None]  # outcomes.py

    def _start_ready(self) -> None:
        jobs = self.jobs
        for step, queue in self.tracker.ready_queues():
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

    def _detach(self, follower: RunningNode) -> None:
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

    def _follower_for(self, leader: RunningNode, depth: int, queued_s: float) -> RunningNode | None:
        """Launch the first ready node that fits in what leader holds as its follower, if it may join a
        queue depth deep holding queued_s of expected work; None if none does."""
        for step, queue in self.tracker.ready_queues():
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
        self, name: str, step: StepInfo, res: Resources, gpus: tuple[Gpu, ...], leader: RunningNode | None
    ) -> None:
        node: Node = self.plan.nodes[name]
        attempt = self.attempts.get(name, 0) + 1
        self.attempts[name] = attempt
        env = dict(node.env)  # what the keeper adds to the run's environment
        env["DAGFLOW_NODE"] = name
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu.index for gpu in gpus)
        elif self.pool.cpu_only:
            env["CUDA_VISIBLE_DEVICES"] = ""  # --gpus none: no node of the run sees a GPU
        if node.argv and node.argv[0] == DAGFLOW_LAUNCHER and "PYTHONPATH" not in env and "PYTHONPATH" in self._env:
            env["PYTHONPATH"] = self._env["PYTHONPATH"]
        argv = command_for(step.runtime.argv(node.argv), env)  # runtime.python: what `python` means
        running = RunningNode(name, step, attempt, time.monotonic(), gpus, res, holds=leader is None)
        self.running[name] = running
        self.states[name] = RUNNING
        try:
            argv = with_gpu_memory(argv, env, gpus, (res.gpu_memory_mb or 0) if self.pool.cpu_only else None)
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

    def _dropped(self, running: RunningNode) -> None:
        """A follower the keeper dropped before it started (the run is stopping): no attempt was made, so
        nothing is journaled or reported, and it stays pending for a resume to run."""
        self._free(running)
        self.attempts[running.name] -= 1
        self.states[running.name] = PENDING

    def _free(self, running: RunningNode) -> None:
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
