"""How many nodes may run at once within the open-files limit (RLIMIT_NOFILE).

A running node holds FDS_PER_NODE descriptors in its keeper (keeper.py): the read ends of its
stdout and stderr pipes and, once it prints, its two log files (the write ends are open only while it is
spawned, before the log files). Past the limit a node cannot start ("Too many open files") or, worse, its
log cannot be opened and what it prints is lost. The common soft limit of 1024 is only a default for
programs that select(2); the hard limit is what this user may have, so a run raises its soft limit to it
and then runs no more nodes at once than fit.
"""

from __future__ import annotations

import resource
import sys

FDS_PER_NODE = 4
# The keeper's own (about 9: its standard streams, procs.jsonl, /dev/null, a wake pipe, epoll) and the
# runner's (about 12, plus one pidfd per adopted node), with room for what either opens for a moment.
FDS_RESERVED = 32


def raise_open_files_limit() -> int | None:
    """Raise this process's soft limit on open files to its hard limit (the keeper it starts inherits it);
    the soft limit now in force, None when there is none."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):  # an unlimited hard limit the kernel still caps (macOS): keep the soft one
            pass
    return None if soft == resource.RLIM_INFINITY else soft


def nodes_within_open_files(jobs: int) -> int:
    """jobs, or fewer when that many running nodes would not fit in the open-files limit (said on stderr)."""
    limit = raise_open_files_limit()
    if limit is None:
        return jobs
    most = max(1, (limit - FDS_RESERVED) // FDS_PER_NODE)
    if jobs <= most:
        return jobs
    need = FDS_RESERVED + jobs * FDS_PER_NODE
    print(f"dagflow: --jobs {jobs} needs ~{need} open files, the limit is {limit} (ulimit -n): running at most "
          f"{most} nodes at once", file=sys.stderr)
    return most
