"""User-facing errors: every one points at the user's text and maps to an exit code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

EXIT_USAGE = 2  # bad input: the user's file or arguments
EXIT_UNREACHABLE = 3  # a batch system that could not be reached


@dataclass(frozen=True, slots=True)
class Diagnostic:
    file: str
    line: int  # 1-based; 0 when unknown
    column: int  # 1-based; 0 when unknown
    path: str  # the field path, e.g. "steps.train.resources.memory"
    message: str  # what is wrong
    allowed: str | None = None  # what is allowed instead
    hint: str | None = None  # e.g. "did you mean 'needs'?"

    def location(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file

    def render(self) -> str:
        text = f"{self.location()}: {self.path or '<document>'}: {self.message}"
        if self.allowed:
            text += f" (allowed: {self.allowed})"
        if self.hint:
            text += f"; {self.hint}"
        return text


def closest(name: str, candidates: Iterable[str]) -> str | None:
    """The "did you mean" hint of every error that names something unknown."""
    import difflib  # not for every importer of this module: only an error pays for it

    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {matches[0]!r}?" if matches else None


class DagflowError(Exception):
    exit_code = EXIT_USAGE


class SpecError(DagflowError):
    """The pipeline file is invalid; carries every problem found, not just the first."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(diagnostics, key=lambda d: (d.file, d.line, d.column, d.path))
        super().__init__("\n".join(d.render() for d in self.diagnostics))


class CannotWriteError(DagflowError):
    """A file dagflow writes could not be written (a full disk, a read-only or foreign directory)."""

    def __init__(self, error: OSError, under: object = None) -> None:
        """under: where it was writing, for an error that names no file (a write to a file already open)."""
        named = error.filename or (f"under {under}" if under is not None else None)
        where = f" {named}" if named else ""
        reason = error.strerror or str(error)
        super().__init__(f"cannot write{where}: {reason}; free some space or fix the directory, then run it again")
