"""How a node's exit is worded, the same by every engine (journal `why`, status, failure summaries)."""

from __future__ import annotations

import signal


def describe_exit(rc: int) -> str:
    """rc as os.waitstatus_to_exitcode gives it: negative for a signal."""
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit code {rc}"
