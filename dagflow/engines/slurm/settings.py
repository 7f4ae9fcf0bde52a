"""The Slurm engine's command-line options (none yet), apart from the engine so that the CLI can offer
every engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import Capabilities, EngineDeclaration, EngineOption

SLURM_OPTIONS: tuple[EngineOption, ...] = ()


# Batch nodes journal into the run directory, so the cluster must share it; metric files too.
ENGINE = EngineDeclaration(
    "dagflow.engines.slurm.engine:SlurmEngine",
    SLURM_OPTIONS,
    Capabilities(shared_filesystem=True, streams_progress=True, arrays=True),
    legacy_marker="slurm",
)
