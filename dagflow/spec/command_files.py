"""The files a step's command names: the words of a shell's `-c` script, and a warning for a script the
command runs that is not beside the pipeline (`python trian.py`), with the nearest name that is, unless
a step writes it. The cache and the engines' file transfer find files from these words too
(plan/script_files.py)."""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from dagflow.errors import Diagnostic, closest
from dagflow.spec.model import PipelineSpec
from dagflow.spec.yamlpos import dotted

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
# Programs whose first word that is not an option is the script they run; -c/-e/-m take code or a module.
_INTERPRETERS = re.compile(r"^(python[0-9.]*|bash|sh|dash|zsh|ksh|Rscript|perl|ruby|node|julia)$")
_CODE_OPTIONS = frozenset({"-c", "-e", "-m", "--eval", "--command"})

_Locate = Callable[[tuple[str | int, ...]], tuple[int, int]]


def shell_words(script: str) -> list[str]:
    """The words of a shell script that may name files it reads: what follows an output redirection
    (`> out`) is written, not read, and a word holding `$` is only known when the shell runs."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: the shell refuses it too
        return []
    words = []
    for index, token in enumerate(tokens):
        if "$" in token or (index and ">" in tokens[index - 1] and not tokens[index - 1].strip("<>&|;()")):
            continue
        words.append(token)
    return words


def missing_scripts(model: PipelineSpec, locate: _Locate, filename: str, base: Path | None) -> list[Diagnostic]:
    """A warning for each step whose command runs a script (`python X`, `bash X`, `./X`) given relative to
    the pipeline that is not there and that no step writes."""
    if base is None:
        return []
    written = [posixpath.normpath(path) for step in model.steps.values()
               for path in (*step.outputs, *([step.metrics] if step.metrics else []))]  # fmt: skip
    warnings = []
    for name, step in model.steps.items():
        for field, script in _scripts(name, step.command):
            normal = posixpath.normpath(script)
            if os.path.exists(base / normal) or any(_within(normal, path) for path in written):
                continue
            line, column = locate(field)
            directory = base / posixpath.dirname(normal)
            try:
                present = sorted(entry.name for entry in directory.iterdir())
            except OSError:
                present = []
            hint = closest(posixpath.basename(normal), present)
            warnings.append(Diagnostic(
                filename, line, column, dotted(field),
                f"the command runs {script!r}, which is not in {directory} and no step writes it",
                hint=hint,
            ))  # fmt: skip
    return warnings


def _scripts(name: str, command: str | list | None) -> list[tuple[tuple[str | int, ...], str]]:
    """(field, word) of each script the command runs, for words without templates or variables."""
    if command is None:
        return []
    field: tuple[str | int, ...] = ("steps", name, "command")
    if isinstance(command, str):
        try:
            argv = shlex.split(command)
        except ValueError:
            return []
        fields = [field] * len(argv)
    else:
        argv = [str(word) for word in command]
        fields = [(*field, index) for index in range(len(argv))]
    found = []
    script = _script_of(argv)
    if script is not None:
        found.append((fields[script], argv[script]))
    if len(argv) >= 3 and posixpath.basename(argv[0]) in SHELLS and argv[1] == "-c":
        words = shell_words(argv[2])
        inner = _script_of(words)
        if inner is not None:
            found.append((fields[2], words[inner]))
    return [(where, word) for where, word in found if _relative_file_word(word)]


def _script_of(argv: list[str]) -> int | None:
    """The index of the script word of argv: the program itself when given as a relative path, else an
    interpreter's first word that is not an option."""
    if not argv:
        return None
    if "/" in argv[0] and not argv[0].startswith("/"):
        return 0
    if not _INTERPRETERS.match(posixpath.basename(argv[0])):
        return None
    for index, word in enumerate(argv[1:], 1):
        if word in _CODE_OPTIONS:
            return None
        if not word.startswith("-"):
            return index
    return None


def _relative_file_word(word: str) -> bool:
    return bool(word) and not word.startswith(("/", "~")) and not any(mark in word for mark in "{}$:*?")


def _within(path: str, written: str) -> bool:
    return path == written or path.startswith(written + "/")
