"""The Slurm engine's command-line options (none yet), apart from the engine so that the CLI can offer
every engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import Capabilities, EngineDeclaration, EngineOption

SLURM_OPTIONS: tuple[EngineOption, ...] = ()


# Batch nodes journal into the run directory, so the cluster must share it; metric files too.
ENGINE = EngineDeclaration(
    "dagflow.engines.slurm.engine:SlurmEngine",
    SLURM_OPTIONS,
    Capabilities(streams_progress=True),
    legacy_marker="slurm",
)
