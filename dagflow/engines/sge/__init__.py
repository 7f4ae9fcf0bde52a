"""The Grid Engine engine: a Plan becomes qsub jobs (job arrays per step where the wiring allows) held with
-hold_jid/-hold_jid_ad, `-l gpu=N` for GPUs, `-pe` for cpus, `-l h_rt` for time limits; the shared node
wrapper stops nodes below a failure (Grid Engine holds wait for a job's end, not its success), and status
folds `qstat -xml` into the run's journal, so `dagflow status` reads the same whichever engine ran the plan.

Runs are started and continued through a run session (dagflow/run/session.py, engines/registry.py
run_session), which drives its engine class.
"""

from __future__ import annotations

from dagflow.lazy import lazy_exports

_EXPORTS = {
    "SgeError": "commands",
    "SgeUnreachableError": "commands",
    "SgeEngine": "engine",
    "SgeRunError": "engine",
    "Submitted": "engine",
}
__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
