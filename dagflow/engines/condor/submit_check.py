"""`dagflow submit`'s warning before queueing: the steps whose jobs no machine of the pool can ever run
(pool_fit.py's rule, the one `dagflow status` explains idle nodes with), named with why, so that a user
does not wait for nodes that will sit idle for good.

Each step's job ad is condor_submit's own (`condor_submit -dry-run`: parsed, not queued), asked of the
pool's machines as condor_status has them. Where the pool or condor_submit cannot be asked, nothing is said.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dagflow.engines.condor import pool_fit

DAGMAN_SUBMIT = ".condor.sub"  # the DAGMan job's own submit file, beside the steps' <step>.sub


def never_matching(
    condor_dir: Path, pool: str | None, run: pool_fit.Runner = pool_fit.run_tool
) -> list[tuple[str, str]]:
    """(step, why) for each step whose job no machine of the pool can ever run."""
    steps = sorted(path for path in Path(condor_dir).glob("*.sub") if not path.name.endswith(DAGMAN_SUBMIT))
    if not steps:
        return []
    machines = pool_fit.whole_machines(pool_fit.parse_ads(run(pool_fit.machines_argv(pool)) or ""))
    if not machines:
        return []
    found = []
    for path in steps:
        job = next(iter(pool_fit.parse_ads(run(["condor_submit", "-dry-run", "-", str(path)]) or "")), None)
        if job is not None and not pool_fit.ever_matches(job, machines):
            found.append((path.stem, pool_fit.never_why(job, machines)))
    return found


def warn_never_matching(condor_dir: Path, pool: str | None) -> None:
    for step, why in never_matching(condor_dir, pool):
        print(f"dagflow: warning: step {step} never matches: no machine in the pool can run its jobs ({why}); "
              "they will wait in the queue", file=sys.stderr)
