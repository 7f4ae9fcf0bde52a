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
    needed = _transitive_needs(model)
    found: dict[tuple[str, int], Diagnostic] = {}
    for node in nodes:
        if node.step not in model.steps:  # dagflow's own helper nodes follow their step
            continue
        for index, path in enumerate(node.inputs):
            read = _normal(path)
            if read is None or (node.step, index) in found:
                continue
            writer = writers.get(read) or below.get(read) or _written_above(read, writers)
            if writer is None or writer.step == node.step or writer.step in needed[node.step]:
                continue
            if writer.step not in model.steps:
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


def _transitive_needs(model: PipelineSpec) -> dict[str, set[str]]:
    """Each step -> every step it needs, directly or through others."""
    closure: dict[str, set[str]] = {}

    def needs_of(name: str) -> set[str]:
        if name not in closure:
            closure[name] = set()  # a cycle is refused elsewhere; this only stops the walk
            found: set[str] = set()
            for need in model.steps[name].needed_steps:
                if need in model.steps:
                    found |= {need, *needs_of(need)}
            closure[name] = found
        return closure[name]

    for name in model.steps:
        needs_of(name)
    return closure
