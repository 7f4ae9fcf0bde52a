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
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json

Curve = dict[int, float]  # step -> metric value


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
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return step, float(value)


@dataclass
class _FileState:
    offset: int = 0
    curve: Curve = field(default_factory=dict)


class ProgressReader:
    """Curves of metrics files, read incrementally: only the complete lines appended since the last read."""

    def __init__(self, metric: str) -> None:
        self.metric = metric
        self._files: dict[Path, _FileState] = {}

    def curve(self, path: Path) -> Curve:
        state = self._files.setdefault(path, _FileState())
        try:
            with path.open("rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < state.offset:  # rewritten from the start: read it all again
                    state.offset, state.curve = 0, {}
                handle.seek(state.offset)
                chunk = handle.read(size - state.offset)
        except OSError:
            return state.curve
        complete = chunk.rfind(b"\n") + 1  # a line still being written waits for the next read
        for line in chunk[:complete].decode(errors="replace").splitlines():
            point = progress_point(line, self.metric)
            if point is not None:
                state.curve[point[0]] = point[1]
        state.offset += complete
        return state.curve

    def forget(self, path: Path) -> None:
        self._files.pop(path, None)


def mean_curve(curves: list[Curve]) -> Curve:
    """A trial with several objective nodes: the mean at each step every node has reported."""
    if not curves:
        return {}
    steps = set(curves[0]).intersection(*curves[1:])
    return {step: sum(curve[step] for curve in curves) / len(curves) for step in sorted(steps)}
