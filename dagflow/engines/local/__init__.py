"""The local engine: runs a Plan's nodes as processes on this machine, like a personal DAGMan.

from dagflow.engines.local import RunOptions, run_local, resume_local
result = run_local(plan, RunOptions(runs_dir=Path(".dagflow/runs"), jobs=4))
result.state, result.states, result.exit_code
"""

from __future__ import annotations

from dagflow.lazy import lazy_exports

_EXPORTS = {
    "LocalEngine": "engine",
    "check_runnable": "engine",
    "prepare_run": "engine",
    "resume_local": "engine",
    "run_local": "engine",
    "RunOptions": "options",
    "LocalRunner": "runner",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
