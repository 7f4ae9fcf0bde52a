"""DAG bookkeeping for the runner: unfinished-parent counts, ready queues by step priority, failures."""

from __future__ import annotations

from bisect import insort
from collections import deque

from dagflow.plan import Plan, StepInfo


class DagTracker:
    """Ready nodes wait in one FIFO per step; steps are visited highest priority first. Only the queues
    that may hold nodes are visited (`ready_queues`): a pass over every step's queue per scheduling turn
    made a run of thousands of one-node steps quadratic in its steps."""

    def __init__(self, plan: Plan, done: set[str]) -> None:
        self.children = plan.children()
        self.waiting: dict[str, int] = {}
        first_seen: dict[str, int] = {}
        for index, (name, node) in enumerate(plan.nodes.items()):
            first_seen.setdefault(node.step, index)
            if name not in done:
                self.waiting[name] = sum(1 for parent in node.parents if parent not in done)
        self._step_of = {name: node.step for name, node in plan.nodes.items()}
        order = sorted(first_seen, key=lambda step: (-plan.steps[step].priority, first_seen[step]))
        self.queues: list[tuple[StepInfo, deque[str]]] = [(plan.steps[step], deque()) for step in order]
        self._rank_of = {step.name: rank for rank, (step, _) in enumerate(self.queues)}
        self._listed: list[int] = []  # ranks of the queues pushed to since they were last seen empty, sorted
        self._is_listed: set[int] = set()

    def initially_ready(self) -> list[str]:
        return [name for name, count in self.waiting.items() if count == 0]

    def push(self, name: str, front: bool = False) -> None:
        rank = self._rank_of[self._step_of[name]]
        queue = self.queues[rank][1]
        if rank not in self._is_listed:
            self._is_listed.add(rank)
            insort(self._listed, rank)
        if front:
            queue.appendleft(name)
        else:
            queue.append(name)

    def ready_queues(self) -> list[tuple[StepInfo, deque[str]]]:
        """The queues holding ready nodes, highest priority first (the callers take nodes from them)."""
        queues = self.queues
        listed = [rank for rank in self._listed if queues[rank][1]]
        if len(listed) < len(self._listed):
            self._listed = listed
            self._is_listed = set(listed)
        return [queues[rank] for rank in listed]

    def has_ready(self) -> bool:
        return any(self.queues[rank][1] for rank in self._listed)

    def succeeded(self, name: str) -> list[str]:
        """Mark name done; return the children that now have every parent done."""
        self.waiting.pop(name, None)
        ready = []
        for child in self.children[name]:
            count = self.waiting.get(child)
            if count is not None:
                count -= 1
                self.waiting[child] = count
                if count == 0:
                    ready.append(child)
        return ready

    def failed(self, name: str) -> list[str]:
        """Mark name finished for good; return its not-yet-finished descendants, which now never run."""
        self.waiting.pop(name, None)
        blocked: list[str] = []
        stack = list(self.children[name])
        while stack:
            child = stack.pop()
            if self.waiting.pop(child, None) is not None:
                blocked.append(child)
                stack.extend(self.children[child])
        return blocked
