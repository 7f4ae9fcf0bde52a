"""A node's stdout and stderr: `logs/<node>.out|.err`, opened by the node process itself.

The runner passes the two paths to posix_spawn as open actions, so the child opens its own log files
before it execs: the runner holds no pipes, reads nothing and copies nothing, which took about a dozen
system calls per node (two pipes, their epoll registrations, reads and closes). Both files therefore
exist, possibly empty, for every node that started. The first attempt truncates them (a resumed run
reruns a node from scratch); a retry appends, after a `=== dagflow: attempt N ===` line the runner
writes to each before it starts the attempt. A node's output goes straight to disk, so a runner killed
with SIGKILL loses none of it.
"""

from __future__ import annotations

import os

_STREAMS = (".out", ".err")
_FIRST = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_RETRY = os.O_WRONLY | os.O_CREAT | os.O_APPEND


def spawn_actions(logs_dir: str, name: str, attempt: int, stdin: int) -> list[tuple]:
    """posix_spawn file actions: stdin from the fd `stdin`, stdout and stderr to the node's logs."""
    prefix = f"{logs_dir}/{name}"
    flags = _FIRST
    if attempt > 1:
        flags = _RETRY
        banner = f"\n=== dagflow: attempt {attempt} ===\n".encode()
        for suffix in _STREAMS:
            append(prefix + suffix, banner)
    return [
        (os.POSIX_SPAWN_DUP2, stdin, 0),
        (os.POSIX_SPAWN_OPEN, 1, prefix + ".out", flags, 0o644),
        (os.POSIX_SPAWN_OPEN, 2, prefix + ".err", flags, 0o644),
    ]


def append(path: str, data: bytes) -> None:
    fd = os.open(path, _RETRY | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def write_first(logs_dir: str, name: str, attempt: int, stream: int, data: bytes) -> None:
    """What the runner itself has to say in a node's log (a node it could not start)."""
    prefix = f"{logs_dir}/{name}"
    for index, suffix in enumerate(_STREAMS):
        flags = (_FIRST if attempt == 1 else _RETRY) | os.O_CLOEXEC
        fd = os.open(prefix + suffix, flags, 0o644)
        try:
            if index == stream:
                os.write(fd, data)
        finally:
            os.close(fd)


def nonempty(path: os.PathLike[str] | str) -> bool:
    """Whether a log file holds anything (a node that printed nothing leaves an empty one)."""
    try:
        return os.stat(path).st_size > 0
    except OSError:
        return False
