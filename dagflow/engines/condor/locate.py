"""Where the schedd says a condor run lives: its DAGMan job carries the run id as its batch name
(JobBatchName, from the BatchName submit_prepared gives) and runs in the run's condor/ directory (Iwd), so a
run id, or the start of one, finds the run directory from any working directory, also when the user's index
of runs lacks it. Asked of the local schedd, queue and history.
"""

from __future__ import annotations

from pathlib import Path

from dagflow.engines.condor.records import condor_dir
from dagflow.engines.condor.schedd import dagman_ads

_HISTORY_MATCHES = 50  # DAGMan jobs read back from the history at most


def run_dirs(prefix: str) -> list[Path]:
    """The run directories of the DAGMan jobs whose batch name is or starts with prefix (a checked run id)."""
    found: dict[str, Path] = {}
    for ad in dagman_ads(prefix, ["JobBatchName", "Iwd"], _HISTORY_MATCHES):
        iwd, name = ad.get("Iwd"), ad.get("JobBatchName")
        if isinstance(iwd, str) and isinstance(name, str):
            run_dir = Path(iwd).parent
            if run_dir.name == name and condor_dir(run_dir) == Path(iwd):
                found.setdefault(str(run_dir), run_dir)
    return list(found.values())
