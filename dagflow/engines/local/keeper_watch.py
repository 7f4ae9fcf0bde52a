"""A keeper's watch: when a keeper dies, the nodes it still ran die with it.

The keeper outlives a killed runner so that a resume can adopt its nodes and take their results. If the
keeper is killed too, nothing can learn how its nodes end: a node that finished its work after that
would be run again by the next run, and its side effects would happen twice. So each keeper has a
watch, a small process of its own session that the runner starts beside it: it waits for the keeper to
exit (a pidfd) and then kills the process group of every node the keeper recorded a start and no exit
for (procs.jsonl; `kill_orphans` recognises them by the environment they inherit). A keeper that ends
normally has no such node left, so the watch then does nothing. The next run finds those nodes lost
and runs them again, once.

Limits: a node that cleared its environment (`env -i`) is not recognised here (the run's cgroup, where
node_reaper.py has one, still ends it with the run); a node that ends in the instant between its keeper's
death and the watch's kill is run again; and a `kill -9` of the watch itself leaves the keeper unwatched.

    python -m dagflow.engines.local.keeper_watch RUN_DIR KEEPER_PID
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
from pathlib import Path

from dagflow.data import with_import_root
from dagflow.engines.local.procs import kill_orphans, read_procs


def start_watch(run_dir: Path, keeper_pid: int) -> None:
    """Start the watch of keeper_pid, detached: it must outlive the runner that starts it."""
    if not hasattr(os, "pidfd_open"):  # no pidfds (not Linux): no watch
        return
    argv = [sys.executable, "-m", "dagflow.engines.local.keeper_watch", str(run_dir), str(keeper_pid)]
    env = {"PYTHONPATH": with_import_root(None), "PATH": os.environ.get("PATH", os.defpath)}
    subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True, env=env,
    )  # fmt: skip


def watch(run_dir: Path, keeper_pid: int) -> int:
    """Wait for the keeper to exit, then kill the nodes it left running; how many there were."""
    try:
        pidfd = os.pidfd_open(keeper_pid)
    except ProcessLookupError:
        pass  # it has exited already
    else:
        select.select([pidfd], [], [])
        os.close(pidfd)
    left = [
        (entry.pid, name)
        for name, entry in read_procs(run_dir / "procs.jsonl").items()
        if entry.keeper == keeper_pid and entry.rc is None
    ]
    return kill_orphans(left, run_dir.name, grace_s=0.0) if left else 0


if __name__ == "__main__":
    watch(Path(sys.argv[1]), int(sys.argv[2]))
