"""Reading input nobody vetted (a service's answer, a file someone else wrote) within limits.

At most `max_bytes` are read, the text must be UTF-8, and JSON may nest at most `max_depth` levels
(Python's json module recurses once per level: a deep enough document raises RecursionError). Every
problem is a BoundedInputError carrying the line and column it was found at, for the caller to put
in its own message beside the file's or the service's name.

A file a job wrote (a metrics file, its stdout or stderr, an entry of an input directory) is opened
only with `open_regular`: opening never waits (O_NONBLOCK: a FIFO without a writer would block open
and read for ever) and anything but a regular file (a FIFO, a device, a socket, a directory) is
refused before a byte is read; files read whole are read with `read_bounded`, at most a cap.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

MAX_JOB_FILE_BYTES = 16 * 1024 * 1024  # a file a job wrote that dagflow reads whole (a metrics file)
MAX_DEPTH = 32  # levels of nesting; far above what the files and answers dagflow reads use (a handful)

# A JSON string (skipped whole: brackets inside it do not nest), or a bracket. The string pattern is
# the unrolled loop, linear even on an unterminated string.
_STRING_OR_BRACKET = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class BoundedInputError(Exception):
    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.line = line  # 1-based; 0 when it is about the whole input
        self.column = column


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """path opened for reading, when it is a regular file (or a symlink to one); BoundedInputError when it
    is something else, OSError as open raises it. Never blocks, and never makes a terminal ours."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise BoundedInputError(f"{_kind(mode)}, not a regular file: dagflow reads only regular files here")
    except BaseException:
        os.close(fd)
        raise
    # Not inside the try: a Ctrl-C after fdopen made its file object would close fd twice (the object closes
    # it too when collected), the second time closing whatever file had been given that number meanwhile.
    return os.fdopen(fd, "rb")


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_JOB_FILE_BYTES) -> bytes:
    """The regular file's bytes; BoundedInputError when it holds more than max_bytes or is no regular file."""
    with open_regular(path) as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BoundedInputError(f"larger than {_size(max_bytes)}, the most dagflow reads of this file")
    return data


def read_tail(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The regular file's last max_bytes bytes (all of it when shorter); errors as open_regular's."""
    with open_regular(path) as handle:
        handle.seek(max(0, handle.seek(0, os.SEEK_END) - max_bytes))
        return handle.read(max_bytes)


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, column = _position(data, error.start)
        raise BoundedInputError(f"not UTF-8 text (byte 0x{data[error.start]:02x})", line, column) from None


def check_json_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """BoundedInputError at the first bracket that opens level max_depth + 1."""
    if text.count("[") + text.count("{") <= max_depth:  # too few brackets to nest that deep (C-speed check)
        return
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > max_depth:
                line, column = _position(text, match.start())
                raise BoundedInputError(f"nested deeper than {max_depth} levels", line, column)
        elif token in "]}":
            depth -= 1


def loads_json(data: bytes | str, max_depth: int = MAX_DEPTH) -> Any:
    """json.loads for untrusted text: UTF-8 and depth checked first; every failure a BoundedInputError."""
    text = decode_utf8(data) if isinstance(data, bytes) else data
    check_json_depth(text, max_depth)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise BoundedInputError(f"invalid JSON: {error.msg}", error.lineno, error.colno) from None
    except ValueError as error:  # e.g. an integer of more digits than int() converts
        raise BoundedInputError(f"invalid JSON: {error}") from None


_SCAN = json.JSONDecoder().scan_once  # one JSON value at a position of a text: json.loads without its wrappers


def json_lines(data: bytes) -> Iterator[tuple[int, Any, bytes | None]]:
    """Each non-empty line of `data` (lines end with a newline; the last may not): (its number from 1, its
    value, None) where the line is one JSON value with nothing around it and at most MAX_DEPTH brackets,
    parsed in place in the text (a big file's lines read in about half the time json.loads takes on each
    line); else (its number, None, the line) for the caller to read as it reads a line on its own (json.loads,
    loads_json), errors and all. Every line of a file that is not UTF-8 is given that way."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        for number, line in enumerate(data.split(b"\n"), start=1):
            if line:
                yield number, None, line
        return
    position, size, number, count, scan = 0, len(text), 0, text.count, _SCAN
    while position < size:
        number += 1
        end = text.find("\n", position)
        if end < 0:
            end = size
        if end > position:
            after, value = -1, None
            if count("{", position, end) + count("[", position, end) <= MAX_DEPTH:
                try:  # noqa: SIM105 (contextlib.suppress costs a with-block a line)
                    value, after = scan(text, position)
                except (StopIteration, ValueError, RecursionError):
                    pass
            if after == end:
                yield number, value, None
            else:
                yield number, None, text[position:end].encode()
        position = end + 1


def _position(text: str | bytes, index: int) -> tuple[int, int]:
    newline = "\n" if isinstance(text, str) else b"\n"
    line = text.count(newline, 0, index) + 1  # type: ignore[arg-type]
    return line, index - (text.rfind(newline, 0, index) + 1) + 1  # type: ignore[arg-type]


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "a special file")


def _size(count: int) -> str:
    return f"{count // 1024} KiB" if count < 1024 * 1024 else f"{count // (1024 * 1024)} MiB"
