"""Which words of a node's command name files in the pipeline's directory: its scripts and configuration
files (`python train.py --config=conf.yaml`). What a command runs is part of what it computes, so the
local cache keys a node on their content, and HTCondor's transfer mode sends them with the job."""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path: str) -> bool:
    return bool(_URL.match(path))


class ScriptFiles:
    """Which argv words (or `--opt=VALUE` values) name files in the pipeline's directory now: the command's
    scripts and configuration files. One instance serves one compile and remembers every answer: the nodes
    of a step share most words, and a 100k-node plan would otherwise stat a million paths. A word under a
    directory that is not there (`models/us/7/metrics.json`, an output to be) is answered without a stat."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = str(workdir)
        self._words: dict[str, str | None] = {}  # word -> the file's normalised path, or None
        self._directories: dict[str, bool] = {"": True}  # normalised path -> is a directory now

    def __call__(self, argv: list[str]) -> list[str]:
        found = []
        words = self._words
        for word in argv:
            if word not in words:
                words[word] = self._file_named(word)
            path = words[word]
            if path is not None:
                found.append(path)
        return found

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
        if known is None:
            known = self._is_directory(posixpath.dirname(path)) and os.path.isdir(os.path.join(self._workdir, path))
            self._directories[path] = known
        return known
