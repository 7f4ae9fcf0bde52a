"""The options of dagflow's DAG scheduler, which every job executor has (the local engine too): apart from the
scheduler, so that the CLI can offer them as flags without importing it."""

from __future__ import annotations

from dagflow.engines.base import EngineOption

JOBS_OPTION = EngineOption(
    "jobs", ("--jobs", "-j"), "Nodes running at once (default: the cpu count here; a job executor's own limit).",
    int, None, min=1,
)
FORCE_OPTION = EngineOption(
    "force", ("--force",), "Run this step (or node) and its descendants even if cached.", list, (), metavar="STEP"
)
NO_CACHE_OPTION = EngineOption("no_cache", ("--no-cache",), "Run every node; skip nothing.", bool, False)
SCHEDULER_OPTIONS = (JOBS_OPTION, FORCE_OPTION, NO_CACHE_OPTION)
