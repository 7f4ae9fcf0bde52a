"""A dependency declared only by files: a step whose `inputs` name what another step writes (an output or
metrics file, a path inside an output directory, or a directory holding one) and that does not need that
step, directly or through others. Nothing orders the two nodes, so they would run at the same time and the
reader would see the file half written or missing; the plan is refused with the `needs:` that fixes it."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping

from dagflow.errors import Diagnostic
from dagflow.plan.model import Node
from dagflow.spec.model import PipelineSpec
from dagflow.spec.yamlpos import dotted

_Locate = Callable[[tuple[str | int, ...]], tuple[int, int]]


def undeclared_dependencies(
    model: PipelineSpec, nodes: Iterable[Node], locate: _Locate, filename: str
) -> list[Diagnostic]:
    """One error per `inputs` entry that reads what a step it does not need writes."""
    nodes = list(nodes)
    writers: dict[str, Node] = {}  # a written path -> the first node writing it
    below: dict[str, Node] = {}  # a directory -> the first node writing something inside it
    for node in nodes:
        for path in (*node.outputs, node.metrics) if node.metrics else node.outputs:
            written = _normal(path)
            if written is None:
                continue
            writers.setdefault(written, node)
            directory = posixpath.dirname(written)
            while directory and directory not in below:
                below[directory] = node
                directory = posixpath.dirname(directory)
    if not writers:
        return []
    needed, bit = _transitive_needs(model), _bits(model)
    found: dict[tuple[str, int], Diagnostic] = {}
    for node in nodes:
        if node.step not in model.steps:  # dagflow's own helper nodes follow their step
            continue
        for index, path in enumerate(node.inputs):
            read = _normal(path)
            if read is None or (node.step, index) in found:
                continue
            writer = writers.get(read) or below.get(read) or _written_above(read, writers)
            if writer is None or writer.step == node.step or writer.step not in model.steps:
                continue
            if needed[node.step] & bit[writer.step]:
                continue
            field = ("steps", node.step, "inputs", index)
            line, column = locate(field)
            found[(node.step, index)] = Diagnostic(
                filename, line, column, dotted(field),
                f"node {node.name} reads {path!r}, which node {writer.name} of step {writer.step!r} writes, but "
                f"step {node.step!r} does not need {writer.step!r}: nothing orders the two, so they would run at "
                "the same time",
                hint=f"add {writer.step!r} to the `needs:` of step {node.step!r}",
            )  # fmt: skip
    return list(found.values())


def _normal(path: str) -> str | None:
    if not path or "://" in path:
        return None
    return posixpath.normpath(path)


def _written_above(path: str, writers: Mapping[str, Node]) -> Node | None:
    """The writer of a directory that holds path, if any."""
    directory = posixpath.dirname(path)
    while directory and directory != "/":
        if directory in writers:
            return writers[directory]
        directory = posixpath.dirname(directory)
    return None


def _transitive_needs(model: PipelineSpec) -> dict[str, int]:
    """Each step -> the steps it needs, directly or through others, as a bit set (_bits): a set of names per
    step is quadratic in the steps (36 million entries, 25 s, at 6,000 steps of long chains), an int's OR
    of 6,000 bits is a few machine words. Walked without recursion: a chain of thousands of steps is fine."""
    bit = _bits(model)
    closure: dict[str, int] = {}
    entered: set[str] = set()
    for root in model.steps:
        stack = [root]
        while stack:
            name = stack[-1]
            if name in closure:
                stack.pop()
                continue
            needs = [need for need in model.steps[name].needed_steps if need in model.steps]
            waiting = [need for need in needs if need not in closure and need not in entered]
            if name not in entered and waiting:
                entered.add(name)  # a cycle is refused elsewhere; this only stops the walk
                stack.extend(waiting)
                continue
            found = 0
            for need in needs:
                found |= bit[need] | closure.get(need, 0)
            closure[name] = found
            stack.pop()
    return closure


def _bits(model: PipelineSpec) -> dict[str, int]:
    return {name: 1 << index for index, name in enumerate(model.steps)}
