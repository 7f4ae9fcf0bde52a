"""Which files in the pipeline's directory a node's command runs: its scripts and configuration files
(`python train.py --config=conf.yaml`), the words of a shell's `-c` script (`sh -c "python a.py > out"`),
the module of `python -m mod`, and the modules those Python files import from the pipeline's directory,
found by reading their `import` statements. What a command runs is part of what it computes, so the
local cache keys a node on their content, and an engine that transfers files sends them with the job.

What cannot be seen this way is not tracked: a module imported by a computed name (`importlib`), an
installed package, a file the program opens by a name its command does not spell, a shell variable
(`$DATA`), and the environment dagflow itself runs in."""

from __future__ import annotations

import ast
import os
import posixpath
import re
import threading
from pathlib import Path

from dagflow.plan.model import Node, Plan
from dagflow.spec.command_files import SHELLS, shell_words

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_PYTHON = re.compile(r"^python[0-9.]*$")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


# One ast.parse at a time in this process: CPython 3.11 keeps the AST constructor's recursion depth in state
# that threads share, so two parses at once (the runners of a search's trials, each on a thread, keying their
# nodes' caches) can fail with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905).
_PARSE_LOCK = threading.Lock()


def is_url(path: str) -> bool:
    return bool(_URL.match(path))


def produced_by(node: Node, path: str) -> bool:
    """Whether path is (under) one of the node's declared outputs or its metrics file: a command word naming
    what the node writes (`--out models/us/metrics.json`) is not a file it runs, and once written by the
    first run it would otherwise change the key of the second (and be sent back to its own job)."""
    products = [*node.outputs, *([node.metrics] if node.metrics else [])]
    return any(path == (own := posixpath.normpath(product)) or path.startswith(own + "/") for product in products)


class ScriptFiles:
    """Which files in the pipeline's directory a command runs now (see the module's docstring). One instance
    serves one compile or one local run and remembers every answer: the nodes of a step share most words, and
    a 100k-node plan would otherwise stat a million paths. A word under a directory that is not there
    (`models/us/7/metrics.json`, an output to be) is answered without a stat. "Not there" is remembered only
    until `changed()` says a node may have written files (the local runner calls it at each success), so a
    file an upstream node makes is seen by the nodes released after it, in the first run as in the next."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = str(workdir)
        self._generation = 0
        self._words: dict[str, str] = {}  # word -> the file's normalised path
        self._absent: dict[str, int] = {}  # word -> the generation it named no file in
        self._directories: dict[str, bool | int] = {"": True}  # path -> True, or the generation it was absent in
        self._imports: dict[str, tuple[tuple[int, int], list[tuple[int, str]]]] = {}  # file -> (signature, imports)
        self._modules: dict[tuple[str, str], tuple[int, list[str]]] = {}  # (root, module) -> (generation, files)

    def changed(self) -> None:
        """Files may have appeared since: look again at words that named none."""
        self._generation += 1

    def of(self, node: Node) -> list[str]:
        """The files node's command runs, less what the node itself writes (`produced_by`)."""
        return [path for path in self(node.argv) if not produced_by(node, path)]

    def __call__(self, argv: list[str]) -> list[str]:
        found: list[str] = []
        entries: list[tuple[str, str]] = []  # (a Python file the command runs, where its imports start)
        self._named(argv, found, entries)
        if entries:
            seen = set(found)
            for path, root in entries:
                self._imported(path, root, found, seen)
        return found

    def _named(self, argv: list[str], found: list[str], entries: list[tuple[str, str]]) -> None:
        for index, word in enumerate(argv):
            path = self._file(word)
            if path is not None:
                found.append(path)
                if path.endswith(".py"):
                    entries.append((path, posixpath.dirname(path)))
            if index and argv[index - 1] == "-c" and posixpath.basename(argv[0]) in SHELLS:
                self._named(shell_words(word), found, entries)
            elif word == "-m" and index + 1 < len(argv) and _runs_python(argv, index):
                modules = self._module(argv[index + 1], "")
                found += modules
                entries += [(module, "") for module in modules]

    def _file(self, word: str) -> str | None:
        path = self._words.get(word)
        if path is not None or self._absent.get(word) == self._generation:
            return path
        path = self._file_named(word)
        if path is None:
            self._absent[word] = self._generation
        else:
            self._words[word] = path
        return path

    def _file_named(self, word: str) -> str | None:
        candidate = word.split("=", 1)[1] if word.startswith("-") and "=" in word else word
        if not candidate or candidate.startswith(("-", "/")) or is_url(candidate):
            return None
        normal = posixpath.normpath(candidate)
        if normal.startswith("../") or normal in (".", ".."):
            return None
        if not self._is_directory(posixpath.dirname(normal)):
            return None
        return normal if os.path.isfile(os.path.join(self._workdir, normal)) else None

    def _is_directory(self, path: str) -> bool:
        known = self._directories.get(path)
        if known is True:
            return True
        if known is None or known != self._generation:
            is_dir = self._is_directory(posixpath.dirname(path)) and os.path.isdir(os.path.join(self._workdir, path))
            known = self._directories[path] = True if is_dir else self._generation
        return known is True

    def _module(self, name: str, root: str) -> list[str]:
        """The files `import name` runs from root (a directory of the pipeline's, "" for itself): each
        package's __init__.py on the way, the module itself, and a package's __main__.py (for `-m`)."""
        if not _MODULE.match(name):
            return []
        known = self._modules.get((root, name))
        if known is not None and known[0] == self._generation:
            return known[1]
        files: list[str] = []
        directory = root
        parts = name.split(".")
        for index, part in enumerate(parts):
            directory = posixpath.join(directory, part) if directory else part
            package = self._file(directory + "/__init__.py")
            last = index == len(parts) - 1
            if last and package is None and (module := self._file(directory + ".py")) is not None:
                files.append(module)
            elif package is not None:
                files.append(package)
                if last and (main := self._file(directory + "/__main__.py")) is not None:
                    files.append(main)
            elif not self._is_directory(directory):  # a namespace package is a plain directory
                break
        self._modules[(root, name)] = (self._generation, files)
        return files

    def _imported(self, path: str, root: str, found: list[str], seen: set[str]) -> None:
        """Add the pipeline's modules that the Python file at path imports (from root, where its program
        started: the script's own directory), and theirs, each once."""
        for level, name in self._imports_of(path):
            if level:  # `from . import x` / `from .m import x`: relative to the importing file's package
                base = posixpath.dirname(path)
                for _ in range(level - 1):
                    base = posixpath.dirname(base)
                files = self._module(name, base) if name else []
            else:
                files = self._module(name, root)
            for file in files:
                if file not in seen:
                    seen.add(file)
                    found.append(file)
                    self._imported(file, root, found, seen)

    def _imports_of(self, path: str) -> list[tuple[int, str]]:
        """(level, module) of every import statement in a Python file (a `from m import n` also gives m.n,
        which may be a submodule); none when it is not Python that parses."""
        full = os.path.join(self._workdir, path)
        try:
            stat = os.stat(full)
        except OSError:
            return []
        signature = (stat.st_size, stat.st_mtime_ns)
        known = self._imports.get(path)
        if known is not None and known[0] == signature:
            return known[1]
        imports: list[tuple[int, str]] = []
        try:
            with open(full, "rb") as handle:
                source = handle.read()
            with _PARSE_LOCK:
                tree = ast.parse(source, full)
        except (OSError, SyntaxError, ValueError):
            tree = None
        for statement in ast.walk(tree) if tree is not None else ():
            if isinstance(statement, ast.Import):
                imports += [(0, alias.name) for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom):
                base = statement.module or ""
                imports.append((statement.level, base))
                prefix = base + "." if base else ""
                imports += [(statement.level, prefix + alias.name) for alias in statement.names if alias.name != "*"]
        self._imports[path] = (signature, imports)
        return imports


def _runs_python(argv: list[str], index: int) -> bool:
    """Whether argv[index] (`-m`) is an option of a Python interpreter: the nearest word before it that is
    not an option is the interpreter (`python3 -u -m mod`, `.venv/bin/python -m mod`)."""
    for word in reversed(argv[:index]):
        if not word.startswith("-"):
            return bool(_PYTHON.match(posixpath.basename(word)))
    return False


def transfer_source(plan: Plan, node: Node) -> str | None:
    """What a transfer node copies (its content is in the node's cache key); None for any other node."""
    return node.argv[2] if is_transfer(plan, node, "transfer") else None


def is_transfer(plan: Plan, node: Node, command: str) -> bool:
    """Whether node runs `dagflow transfer SRC DST` (command "transfer") or `dagflow publish DEST ...`."""
    return plan.steps[node.step].kind == "transfer" and len(node.argv) >= 3 + (command == "transfer") and (
        node.argv[1] == command
    )
