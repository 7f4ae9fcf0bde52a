"""A node's stdout and stderr: pipes the runner reads, copied into `logs/<node>.out|.err`.

The runner holds the read ends, so (1) a log file is only created once its stream says something —
creating two files per node was the largest cost of running many short nodes (ext4 inode allocation
ran to milliseconds per file on a busy machine), and nodes that print nothing leave no files; and
(2) a node orphaned by a killed runner dies of SIGPIPE the next time it writes. Every chunk is written
to the log with one write(2) as it arrives, so a killed runner loses none it had read.
"""

from __future__ import annotations

import os

_READ_SIZE = 1 << 16
_STREAMS = (".out", ".err")


class NodeOutput:
    __slots__ = ("_banner", "_logs", "_prefix", "append", "read_fds", "write_fds")

    def __init__(self, logs_dir: str, name: str, attempt: int) -> None:
        self._prefix = f"{logs_dir}/{name}"
        self.append = attempt > 1  # a retry adds to the earlier attempts' logs
        self._banner = f"\n=== dagflow: attempt {attempt} ===\n".encode() if attempt > 1 else b""
        out_r, out_w = os.pipe()
        try:
            err_r, err_w = os.pipe()
        except OSError:
            os.close(out_r)
            os.close(out_w)
            raise
        os.set_blocking(out_r, False)
        os.set_blocking(err_r, False)
        self.read_fds = [out_r, err_r]  # -1 once closed
        self.write_fds = [out_w, err_w]  # the child's ends; closed once it has them
        self._logs = [-1, -1]

    def close_write_ends(self) -> None:
        for fd in self.write_fds:
            if fd >= 0:
                os.close(fd)
        self.write_fds = [-1, -1]

    def pump(self, stream: int) -> bool:
        """Copy what is readable now from stream (0 stdout, 1 stderr); False once it has ended."""
        fd = self.read_fds[stream]
        if fd < 0:
            return False
        while True:
            try:
                data = os.read(fd, _READ_SIZE)
            except BlockingIOError:
                return True
            if not data:
                return False
            self.write(stream, data)

    def write(self, stream: int, data: bytes) -> None:
        log = self._logs[stream]
        if log < 0:
            flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if self.append else os.O_TRUNC)
            log = self._logs[stream] = os.open(self._prefix + _STREAMS[stream], flags, 0o644)
            data = self._banner + data
        os.write(log, data)

    def close(self) -> None:
        """Copy what is left and close everything (after the node's process group is gone)."""
        self.close_write_ends()
        for stream in (0, 1):
            self.pump(stream)
            self.close_stream(stream)

    def close_stream(self, stream: int) -> None:
        for fds in (self.read_fds, self._logs):
            if fds[stream] >= 0:
                os.close(fds[stream])
                fds[stream] = -1
