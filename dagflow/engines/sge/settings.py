"""The Grid Engine engine's command-line options, apart from the engine so that the CLI can offer every
engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

import re

from dagflow.engines.base import Capabilities, EngineDeclaration, EngineOption
from dagflow.errors import DagflowError

DEFAULT_PE = "smp"  # the parallel environment for steps with more than one cpu
# A Grid Engine object name (sge_types(1) refuses whitespace, quotes, `/:@\\,()[]{}|%`), or a wildcard of one.
_PE = re.compile(r"[A-Za-z0-9_.*?-]{1,200}")

SGE_OPTIONS = (
    EngineOption(
        "sge_pe", ("--sge-pe",), "sge: parallel environment for steps with more than one cpu.",
        default=DEFAULT_PE, commands=frozenset({"run", "submit"}), metavar="PE",
    ),
)  # fmt: skip


class PeError(DagflowError):
    pass


def checked_pe(pe: str) -> str:
    """pe, when qsub's -pe can take it as one parallel environment name (or a wildcard of names)."""
    if not isinstance(pe, str) or not _PE.fullmatch(pe):
        raise PeError(
            f"--sge-pe {pe!r} is not a parallel environment name "
            "(allowed: letters, digits, '_', '.', '-', and the wildcards '*' and '?'; at most 200)"
        )
    return pe


# Batch nodes journal into the run directory, so the cluster must share it; metric files too.
ENGINE = EngineDeclaration(
    "dagflow.engines.sge.engine:SgeEngine",
    SGE_OPTIONS,
    Capabilities(streams_progress=True),
    legacy_marker="sge",
)
