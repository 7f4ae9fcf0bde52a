"""Where a running trial's metric lines can be read on the access point (the engine's `progress_files`
feature, engines/registry.py engine_feature; the search scheduler asks for it).

In the transfer data mode a node's files stay on its execute node until the job ends. For the steps a
plan names in `progress_steps` (a search's objective step under early stopping) the submit description
sets HTCondor's `stream_error = true` ("stderr is streamed back to the machine from which the job was
submitted", condor_submit) and the node wrapper (node.sh --progress) copies each line the command appends
to its metrics file onto stderr, marked (run/progress_stream.py STREAM_MARKER). So the lines are read from
the node's stderr file (`dagflow logs --err`), as a StreamedFile: only marked lines count there. Nothing
else comes back early, and no job gets file access on the access point (no Chirp, no +WantIOProxy).

In the shared mode, and for steps that run in the local universe (on the access point, in the pipeline's
directory), the metrics file itself is where the lines are written: it is read as it is.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.condor.records import CondorRecord
from dagflow.engines.condor.transfer import TRANSFER, runs_on_access_point
from dagflow.plan.model import Plan
from dagflow.run.layout import RunLayout
from dagflow.run.progress_stream import StreamedFile


def progress_files(run_dir: Path, plan: Plan, metrics: list[Path]) -> list[Path | StreamedFile]:
    """For each of the run's metrics files (as the search names them: the plan's workdir / node.metrics),
    the file its lines can be read from while the node runs, in the same order."""
    try:
        record = CondorRecord.load(run_dir)
    except (OSError, ValueError, TypeError):
        record = None
    if record is None or record.data_mode != TRANSFER:
        return list(metrics)
    layout = RunLayout.from_run_dir(run_dir)
    streamed: dict[Path, Path] = {}
    for node in plan.nodes.values():
        step = plan.steps.get(node.step)
        if node.metrics and step is not None and node.step in plan.progress_steps and not runs_on_access_point(step):
            streamed[Path(plan.workdir) / node.metrics] = layout.stderr_path(node.name)
    return [StreamedFile(streamed[path]) if path in streamed else path for path in metrics]
