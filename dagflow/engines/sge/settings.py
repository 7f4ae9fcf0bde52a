"""The Grid Engine engine's command-line options, apart from the engine so that the CLI can offer every
engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import EngineOption

DEFAULT_PE = "smp"  # the parallel environment for steps with more than one cpu

SGE_OPTIONS = (
    EngineOption(
        "sge_pe", ("--sge-pe",), "sge: parallel environment for steps with more than one cpu.",
        default=DEFAULT_PE, commands=frozenset({"run", "submit"}), metavar="PE",
    ),
)  # fmt: skip
