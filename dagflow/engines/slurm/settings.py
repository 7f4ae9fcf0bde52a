"""The Slurm engine's command-line options (none yet), apart from the engine so that the CLI can offer
every engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import EngineOption

SLURM_OPTIONS: tuple[EngineOption, ...] = ()
