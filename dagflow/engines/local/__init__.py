"""The local engine: runs a Plan's nodes as processes on this machine, like a personal DAGMan.

Runs are started and continued through a run session (dagflow/run/session.py, engines/registry.py
run_session), which drives LocalEngine; LocalRunner is the in-process runner it drives.
"""

from __future__ import annotations

from dagflow.lazy import lazy_exports

_EXPORTS = {
    "LocalEngine": "engine",
    "RunOptions": "options",
    "LocalRunner": "runner",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
