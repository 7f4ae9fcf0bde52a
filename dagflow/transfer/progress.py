"""The transfer progress line: files and bytes done out of the total, and the rate.

On a terminal it redraws one line in place a few times a second; in a log file (a pipeline node's
stderr) it writes a line every few seconds, so long transfers show they are alive without flooding.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


def human_bytes(count: float) -> str:
    size = float(count)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size < 1024 or unit == "TB":
            return f"{int(size)} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class Progress:
    def __init__(
        self, label: str, stream: TextIO | None = None, *, interval_s: float | None = None, enabled: bool = True
    ) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval_s = interval_s if interval_s is not None else (0.25 if self.tty else 5.0)
        self.enabled = enabled
        self.total_files = 0
        self.total_bytes = 0
        self.done_files = 0
        self.done_bytes = 0
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._last = self._started
        self._drawn = False

    def set_total(self, files: int, size: int) -> None:
        with self._lock:
            self.total_files, self.total_bytes = files, size

    def bytes_moved(self, count: int) -> None:
        """boto3's transfer callback: bytes moved since its last call (negative when a retry restarts)."""
        with self._lock:
            self.done_bytes += count
            self._maybe_draw()

    def file_done(self, skipped_bytes: int = 0) -> None:
        with self._lock:
            self.done_files += 1
            self.done_bytes += skipped_bytes
            self._maybe_draw()

    def line(self) -> str:
        elapsed = max(time.monotonic() - self._started, 1e-6)
        rate = human_bytes(self.done_bytes / elapsed)
        return (
            f"{self.label}: {self.done_files}/{self.total_files} files, "
            f"{human_bytes(self.done_bytes)}/{human_bytes(self.total_bytes)}, {rate}/s"
        )

    def _maybe_draw(self) -> None:
        now = time.monotonic()
        if self.enabled and now - self._last >= self.interval_s:
            self._last = now
            self._draw()

    def _draw(self) -> None:
        if self.tty:
            self.stream.write("\r\x1b[2K" + self.line())
        else:
            self.stream.write(self.line() + "\n")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """Finish the in-place line on a terminal so later output starts on its own line."""
        with self._lock:
            if self.enabled and self.tty and self._drawn:
                self.stream.write("\n")
                self.stream.flush()
