"""A trial's intermediate metrics: JSON lines appended to its metrics file while it trains.

    {"step": 1, "loss": 0.93}
    {"step": 2, "loss": 0.71}
    ...
    {"loss": 0.52}                  <- the last line is the trial's result (a "step" in it is allowed)

A training script appends one line per epoch, with one write (`report` below does so), and its last
line is the final result, read when the trial succeeds. A metrics file holding one JSON object, as
before, stays valid: it simply reports no progress. A later line for a step replaces an earlier one
(a retried node starts its curve again).

The scheduler polls every running trial's file with a `ProgressReader`, which remembers how far it
read, so each poll reads only the lines appended since the last one.

Where a node runs without a filesystem shared with the scheduler (HTCondor's transfer mode), its engine
streams the lines instead: the node's wrapper copies each line appended to the metrics file onto the
job's stderr as `dagflow-progress: <line>` (STREAM_MARKER), after a `dagflow-progress-start: <id>` line
each time the node (re)starts, and the engine names that stderr file as a `StreamedFile`
(engines/registry.py engine_feature "progress_files"). Only marked lines count there, everything else
the job writes is skipped; a start line forgets what the file said before (a restarted job reports its
curve again), and so does a file that was rewritten from the start. What a job streams is untrusted: the
reader reads at most MAX_READ bytes a poll, skips lines longer than MAX_LINE and every line that is not
a progress point.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json, open_regular
from dagflow.run.progress_stream import STREAM_MARKER, STREAM_START, StreamedFile

Curve = dict[int, float]  # step -> metric value

MAX_READ = 1 << 20  # bytes read from one file in one poll; the rest waits for the next poll
MAX_LINE = 64 * 1024  # a longer line is skipped whole
MAX_STEP = 10**9


def report(path: str | os.PathLike[str], step: int, **metrics: float) -> None:
    """Append one progress line, `{"step": step, **metrics}`, to a trial's metrics file.

    One O_APPEND write of one whole line, so a reader never sees half a line as complete.
    """
    line = json.dumps({"step": int(step), **{name: float(value) for name, value in metrics.items()}}) + "\n"
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def last_object(text: str) -> Any:
    """The metrics file's result: the whole text as one JSON document, or else its last JSON line."""
    try:
        return loads_json(text)
    except BoundedInputError:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        return loads_json(lines[-1])


def progress_point(line: str, metric: str) -> tuple[int, float] | None:
    """(step, value) of one progress line; None for a line without an integer step and a finite metric."""
    try:
        data = loads_json(line)
    except BoundedInputError:
        return None
    if not isinstance(data, dict):
        return None
    step, value = data.get("step"), data.get(metric)
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= MAX_STEP:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return step, float(value)


@dataclass
class _FileState:
    offset: int = 0
    curve: Curve = field(default_factory=dict)
    head: bytes = b""  # a streamed file's first line: another one means the file was rewritten
    skipping: bool = False  # inside a line longer than MAX_LINE: skipped up to its end


class ProgressReader:
    """Curves of metrics files, read incrementally: only the complete lines appended since the last read."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self._files: dict[Path | StreamedFile, _FileState] = {}

    def curve(self, source: Path | StreamedFile) -> Curve:
        state = self._files.setdefault(source, _FileState())
        streamed = isinstance(source, StreamedFile)
        path = source.path if isinstance(source, StreamedFile) else source
        try:
            with open_regular(path) as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < state.offset or (streamed and state.head and handle.read(len(state.head)) != state.head):
                    state.offset, state.curve, state.head, state.skipping = 0, {}, b"", False  # rewritten
                handle.seek(state.offset)
                chunk = handle.read(min(size - state.offset, MAX_READ))
        except (OSError, BoundedInputError):
            return state.curve
        complete = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        if complete == 0 and len(chunk) >= MAX_LINE:  # no line end in sight: skip what there is
            state.offset += len(chunk)
            state.skipping = True
            return state.curve
        lines = chunk[:complete].split(b"\n")[:-1]
        if state.skipping and lines:
            lines, state.skipping = lines[1:], False  # the rest of the overlong line
        if streamed and state.offset == 0 and lines:
            state.head = lines[0] + b"\n"
        for line in lines:
            self._line(state, line, streamed)
        state.offset += complete
        return state.curve

    def _line(self, state: _FileState, line: bytes, streamed: bool) -> None:
        if len(line) > MAX_LINE:
            return
        if streamed:
            if line.startswith(STREAM_START):
                state.curve = {}  # the node (re)started: its curve begins again
                return
            if not line.startswith(STREAM_MARKER):
                return  # the job's own stderr
            line = line[len(STREAM_MARKER) :]
        point = progress_point(line.decode(errors="replace"), self.metric)
        if point is not None:
            state.curve[point[0]] = point[1]

    def forget(self, source: Path | StreamedFile) -> None:
        self._files.pop(source, None)


def mean_curve(curves: list[Curve]) -> Curve:
    """A trial with several objective nodes: the mean at each step every node has reported."""
    if not curves:
        return {}
    steps = set(curves[0]).intersection(*curves[1:])
    return {step: sum(curve[step] for curve in curves) / len(curves) for step in sorted(steps)}
