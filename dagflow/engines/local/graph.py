"""DAG bookkeeping for the runner: unfinished-parent counts, ready queues by step priority, failures."""

from __future__ import annotations

from collections import deque

from dagflow.plan import Plan, StepInfo


class DagTracker:
    """Ready nodes wait in one FIFO per step; steps are visited highest priority first."""

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
        self._queue_of = {step.name: queue for step, queue in self.queues}

    def initially_ready(self) -> list[str]:
        return [name for name, count in self.waiting.items() if count == 0]

    def push(self, name: str, front: bool = False) -> None:
        queue = self._queue_of[self._step_of[name]]
        if front:
            queue.appendleft(name)
        else:
            queue.append(name)

    def has_ready(self) -> bool:
        return any(queue for _, queue in self.queues)

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
