"""Run ids: sortable by start time, safe as a directory name.

Every run id a user gives (--run-id, --resume, a positional RUN_ID, a search's --name) is checked
here, by validate_run_id, before it names a directory or reaches a batch system.
"""

from __future__ import annotations

import re
import secrets
import time

from dagflow.errors import DagflowError

# Checked with fullmatch: with re.match, '$' also matches before a trailing newline ("abc\n").
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_RESERVED = frozenset({"latest"})  # `latest` names the newest run on the command line
_SHOWN = 60  # characters of a refused id quoted in the message


class RunIdError(DagflowError):
    pass


def new_run_id(pipeline: str) -> str:
    """e.g. ratings-retrain-20250301-142501-7f3a, the shape plan expansion gives run ids."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{pipeline}-{stamp}-{secrets.token_hex(2)}"


def validate_run_id(run_id: str) -> str:
    """run_id itself when it is safe as one directory name; RunIdError (exit code 2) otherwise."""
    if not isinstance(run_id, str) or _RUN_ID.fullmatch(run_id) is None or run_id in _RESERVED:
        raise RunIdError(
            f"invalid run id {_quoted(run_id)}: use letters, digits, '.', '_' and '-' "
            "(at most 200, starting with a letter or digit, and not 'latest')"
        )
    return run_id


def _quoted(run_id: object) -> str:
    if isinstance(run_id, str) and len(run_id) > _SHOWN:
        return f"{run_id[:_SHOWN]!r}... ({len(run_id)} characters)"
    return repr(run_id)
