"""Files steps share without declaring them: what a pool with no shared filesystem would not deliver; and
files two nodes would both write (shared_outputs).

The heuristic reads each step's command words as written (templates unrendered, so `models/{region}` in
one step matches `models/{region}/model.pkl` in another) and compares them with the other steps' declared
outputs (a transfer step's `to` and a step's `metrics` count as outputs):

- a word names another step's output, lies inside one (a file in an output directory), or is a directory
  holding one (`models` when another step writes `models/{region}/metrics.json`);
- and the step does not declare it: no input equals the word, lies inside it or holds it, and it is not
  (inside) one of the step's own outputs (`--out models/{region}` is what the step writes).

Words that are options (`-x`), URLs or absolute paths are not compared; `--opt=VALUE` compares VALUE.
It cannot see a file a script opens by a name its command does not mention (a directory passed whole,
say, of which only some files are declared).

command_words, input_paths and normal_path read a step's command and inputs the same way for an engine's
own rules about them (its spec check).
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Protocol

from dagflow.errors import Diagnostic
from dagflow.spec.model import StepSpec
from dagflow.spec.yamlpos import Path_, dotted

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_QUOTING = re.compile(r"[\"'\\]")


def normal_path(path: str) -> str:
    return posixpath.normpath(path.replace("{{", "{").replace("}}", "}")) if path else ""


def _related(word: str, path: str) -> bool:
    """word and path name the same file, or one lies inside the other."""
    return word == path or path.startswith(word + "/") or word.startswith(path + "/")


def command_words(name: str, step: StepSpec) -> Iterator[tuple[Path_, str]]:
    """(location, word) for each command word after the program, with `--opt=VALUE` reduced to VALUE."""
    base: Path_ = ("steps", name, "command")
    if isinstance(step.command, str):
        try:  # without quotes or backslashes shlex splits at blanks only, and str.split is 50x faster
            plain = not _QUOTING.search(step.command)
            words = (step.command.split() if plain else shlex.split(step.command))[1:]
        except ValueError:
            return
        located = [(base, word) for word in words]
    elif isinstance(step.command, list):
        located = [((*base, index), str(word)) for index, word in enumerate(step.command)][1:]
    else:
        return
    for path, word in located:
        if word.startswith("-"):
            if "=" not in word:
                continue
            word = word.split("=", 1)[1]
        if word:
            yield path, word


def _outputs(step: StepSpec) -> list[str]:
    outputs = list(step.outputs)
    if step.kind == "transfer" and step.to and not _URL.match(step.to):
        outputs.append(step.to)
    if step.metrics:
        outputs.append(step.metrics)
    return [normal_path(path) for path in outputs if not _URL.match(path)]


def input_paths(step: StepSpec) -> list[str]:
    return [normal_path(path) for path in step.inputs if not _URL.match(path)]


def _ancestors(path: str) -> Iterator[str]:
    """models/us/model.pkl -> models/us, models."""
    while "/" in path:
        path = path.rsplit("/", 1)[0]
        yield path


def _writers_index(produced: dict[str, list[str]]) -> dict[str, set[str]]:
    """Every output and every directory above one -> the steps writing it or something in it."""
    index: dict[str, set[str]] = {}
    for name, outputs in produced.items():
        for output in outputs:
            for path in (output, *_ancestors(output)):
                index.setdefault(path, set()).add(name)
    return index


def undeclared_sharing(steps: dict[str, StepSpec], locate: object, filename: str) -> list[Diagnostic]:
    """A warning for each command word naming another step's output that the step does not declare.
    locate(path) -> (line, column). Indexed, so thousands of steps stay quick."""
    produced = {name: _outputs(step) for name, step in steps.items()}
    index = _writers_index(produced)  # outputs and the directories above them
    exact: dict[str, set[str]] = {}  # outputs only (a directory output holds what lies below it)
    for writer, outputs in produced.items():
        for output in outputs:
            exact.setdefault(output, set()).add(writer)
    warnings = []
    for name, step in steps.items():
        declared = input_paths(step) + produced[name]
        for path, word in command_words(name, step):
            if _URL.match(word) or word.startswith("/"):
                continue
            normal = normal_path(word)
            if normal in (".", "..") or any(_related(normal, known) for known in declared):
                continue
            # the word is an output or a directory holding one, or lies inside an output directory
            writers = set(index.get(normal, ()))
            for above in _ancestors(normal):
                writers |= exact.get(above, set())
            writers.discard(name)
            if writers:
                line, column = locate(path)  # type: ignore[operator]
                warnings.append(Diagnostic(
                    filename, line, column, dotted(path),
                    f"the command uses {word!r}, which step {min(writers)} writes (its outputs), but this step "
                    "does not list it under inputs: a pool without a shared filesystem will not deliver it",
                    hint=f"add it (or the files it reads there) to steps.{name}.inputs",
                ))
    return warnings


class Writer(Protocol):
    """What shared_outputs reads of a node of the plan (dagflow.plan.Node)."""

    @property
    def name(self) -> str: ...
    @property
    def step(self) -> str: ...
    @property
    def coords(self) -> Mapping[str, str]: ...
    @property
    def outputs(self) -> Sequence[str]: ...
    @property
    def metrics(self) -> str | None: ...


_Locate = Callable[[Path_], tuple[int, int]]


def shared_outputs(nodes: Iterable[Writer], locate: _Locate, filename: str) -> list[Diagnostic]:
    """An error for each output or metrics field whose expanded path another node also writes, or that lies
    inside a directory another node writes (whichever runs last would overwrite or mix into the other's).
    One per field, located at it. One pass over the paths into a dict, then one walk up each directory
    that holds one (remembered), so a 100k-node plan stays quick."""
    writers: dict[str, Writer] = {}  # a written path -> the first node writing it
    found: dict[Path_, Diagnostic] = {}
    for node in nodes:
        for path in (*node.outputs, node.metrics) if node.metrics else node.outputs:
            key = _written_path(path)
            if key is not None and (first := writers.setdefault(key, node)) is not node:
                _report(found, (node, key), (first, key), f"would write {path!r}, which", locate, filename)
    nearest: dict[str, str | None] = {"": None}  # a directory -> the nearest written path at or above it
    for key, node in writers.items():
        directory = key.rpartition("/")[0]
        above = nearest[directory] if directory in nearest else _nearest_written(directory, writers, nearest)
        if above is not None and writers[above] is not node:
            what = f"would write {key!r} inside {above!r}, a directory"
            _report(found, (node, key), (writers[above], above), what, locate, filename)
    return list(found.values())


def _nearest_written(directory: str, writers: Mapping[str, Writer], nearest: dict[str, str | None]) -> str | None:
    """The nearest path at or above directory that a node writes, if any; each directory is walked once."""
    walked = []
    while directory not in nearest:
        walked.append(directory)
        directory = directory.rpartition("/")[0]
    found = nearest[directory]
    for below in reversed(walked):
        if below in writers:
            found = below
        nearest[below] = found
    return found


def _written_path(path: str) -> str | None:
    """The path as one file system name (`./out//x/` is `out/x`); None for a _URL or nothing."""
    if path and path[-1] not in "/." and "//" not in path and "./" not in path and ":" not in path:
        return path  # most paths: normpath and the _URL test cost more than the rest of the check
    if not path or _URL.match(path):
        return None
    return posixpath.normpath(path)


def _field(node: Writer, key: str) -> Path_:
    """node's field that writes key (the first, where several do)."""
    for index, path in enumerate(node.outputs):
        if _written_path(path) == key:
            return ("steps", node.step, "outputs", index)
    return ("steps", node.step, "metrics")


def _report(found: dict[Path_, Diagnostic], write: tuple[Writer, str], other: tuple[Writer, str], what: str,
            locate: _Locate, filename: str) -> None:
    """Add the error of the field by which write's node writes its path, which other's node writes too (or a
    directory holding it); the first found per field."""
    (node, key), (other_node, other_key) = write, other
    field, other_field = _field(node, key), _field(other_node, other_key)
    if field in found:
        return
    line, column = locate(field)
    where = ""
    if other_field != field:
        other_line, other_column = locate(other_field)
        where = f" ({dotted(other_field)} at {filename}:{other_line}:{other_column})"
    message = (f"node {node.name} {what} node {other_node.name} writes too{where}: the node that runs last would "
               "overwrite or mix into the other's")
    hint = None
    if node.step == other_node.step:  # nodes of one step: the path lacks the axes they differ on
        axes = [axis for axis, value in node.coords.items() if other_node.coords.get(axis) != value]
        hint = f"put {' '.join(f'{{{axis}}}' for axis in axes)} in the path, so that each node writes its own"
    found[field] = Diagnostic(filename, line, column, dotted(field), message, hint=hint)
