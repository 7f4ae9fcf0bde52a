"""Run ids: sortable by start time, safe as a directory name."""

from __future__ import annotations

import re
import secrets
import time

from dagflow.errors import DagflowError

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class RunIdError(DagflowError):
    pass


def new_run_id(pipeline: str) -> str:
    """e.g. ratings-retrain-20250301-142501-7f3a, the shape plan expansion gives run ids."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{pipeline}-{stamp}-{secrets.token_hex(2)}"


def validate_run_id(run_id: str) -> str:
    if not _RUN_ID.match(run_id) or run_id in {"latest"}:
        raise RunIdError(
            f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-' "
            "(at most 200, not starting with a punctuation character, and not 'latest')"
        )
    return run_id
