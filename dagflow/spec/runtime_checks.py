"""Checks of `runtime:` (pipeline-wide and per step): values that reach an execute node's command line."""

from __future__ import annotations

import re

from dagflow.errors import Diagnostic
from dagflow.spec.model import PipelineSpec, RuntimeSpec
from dagflow.spec.yamlpos import Path_, Positions, dotted
from dagflow.text import CONTROL_CHARACTERS

_BLANK = re.compile(r"\s")


def runtime_errors(model: PipelineSpec, positions: Positions, filename: str) -> list[Diagnostic]:
    found: list[Diagnostic] = []
    layers: list[tuple[Path_, RuntimeSpec | None]] = [(("runtime",), model.runtime)]
    layers += [(("steps", name, "runtime"), step.runtime) for name, step in model.steps.items()]
    for base, runtime in layers:
        if runtime is None:
            continue
        for field in ("python", "container_image"):
            value = getattr(runtime, field)
            if value is None:
                continue
            path = (*base, field)
            problem = None
            if not value or _BLANK.search(value) or CONTROL_CHARACTERS.search(value):
                problem = f"{value!r} must be one word: no blanks or control characters"
            elif field == "python" and not value.startswith("/"):
                problem = f"{value!r} is not an absolute path (a job has no pipeline directory to start from)"
            if problem:
                line, column = positions.of(path)
                hint = "e.g. /opt/venv/bin/python" if field == "python" else "e.g. docker://python:3.11-slim"
                found.append(Diagnostic(filename, line, column, dotted(path), problem, hint=hint))
    return found
