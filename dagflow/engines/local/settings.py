"""The local engine's command-line options, apart from the engine so that the CLI can offer every
engine's flags without importing the engines (engines/registry.py `options`)."""

from __future__ import annotations

from dagflow.engines.base import Capabilities, EngineDeclaration, EngineOption
from dagflow.engines.jobs.options import SCHEDULER_OPTIONS

LOCAL_OPTIONS = (
    *SCHEDULER_OPTIONS,
    EngineOption("gpus", ("--gpus",), "GPU devices to use, e.g. 0,1 (default: what nvidia-smi lists); none: run "
                 "GPU steps on the CPU, a smoke test (CUDA_VISIBLE_DEVICES empty)."),
    EngineOption("kill_grace", ("--kill-grace",), "Seconds between SIGTERM and SIGKILL.", float, 10.0, min=0),
)


# Nodes run here, in the pipeline's directory; their metric lines are read as they are written.
ENGINE = EngineDeclaration(
    "dagflow.engines.local.engine:LocalEngine",
    LOCAL_OPTIONS,
    Capabilities(streams_progress=True),
    provides=(
        ("check_devices", "dagflow.engines.local.devices:check_devices"),  # `dagflow search run --gpus`
        ("drop_cache_entries", "dagflow.engines.jobs.cache:drop_entries"),  # `dagflow runs gc`
        ("launch_here", "dagflow.engines.local.engine:launch_here"),  # search trials, on the search's threads
    ),
)
