"""Promotion verdicts of a condor run, brought into its run directory from the jobs' output.

`dagflow promote` (a `<step>.promote` node) writes its verdict to $DAGFLOW_RUN_DIR/promotions/<node>.json
where it sees the run directory, as the local and batch engines let it; the run summary and the report read
it there (run/promotions.py). An HTCondor job does not see it (no shared run directory in the transfer
mode), but its output comes back, and in it the line `dagflow promote` prints: `NODE: VERDICT: REASON`
(on stdout, or stderr when it failed). Status reads (observe.py) record that verdict, once per attempt: a
verdict file older than the node's output is replaced. The numbers compared are not in that line: the
recorded verdict has none (new and old are null).
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise

from dagflow.bounded import BoundedInputError, read_tail
from dagflow.plan import Plan
from dagflow.plan.index import PlanIndex
from dagflow.run.journal import FAILED, SUCCEEDED, NodeRecord
from dagflow.run.layout import RunLayout
from dagflow.run.promotions import Verdict, promotion_nodes, verdict_path, write_verdict

_VERDICTS = ("promoted", "kept", "failed")
_TAIL = 64 * 1024  # the bytes of a promotion node's output read: its verdict line is its last


def record_verdicts_seen(layout: RunLayout, index: PlanIndex, records: Mapping[str, NodeRecord]) -> None:
    """Record the verdict of each promotion node that ended (the module docstring says how). A run
    directory this user cannot write leaves them unrecorded: the summary then says undecided."""
    plan: Plan | None = None
    for name, _ in promotion_nodes(index):
        record = records.get(name)
        if record is None or record.state not in (SUCCEEDED, FAILED):
            continue
        output = layout.stdout_path(name) if record.state == SUCCEEDED else layout.stderr_path(name)
        target = verdict_path(layout.run_dir, name)
        try:
            written = output.stat().st_mtime
            if target.exists() and target.stat().st_mtime >= written:
                continue
            found = verdict_line(read_tail(output, _TAIL).decode("utf-8", "replace"), name)
            if found is None:
                continue
            plan = plan or layout.load_plan()
            argv = plan.nodes[name].argv
            args = {flag: value for flag, value in pairwise(argv) if flag.startswith("--")}
            write_verdict(layout.run_dir, Verdict(
                node=name, verdict=found[0], reason=found[1], metric=args.get("--metric", ""),
                better=args.get("--better", ""), model=args.get("--model"), pointer=args.get("--than"),
                run_id=args.get("--run-id"),
            ))  # fmt: skip
        except (OSError, KeyError, ValueError, BoundedInputError):
            continue


def verdict_line(text: str, node: str) -> tuple[str, str] | None:
    """(verdict, reason) from the last `NODE: VERDICT: REASON` line of a promotion node's output."""
    for line in reversed(text.splitlines()):
        if line.startswith(f"{node}: "):
            verdict, _, reason = line[len(node) + 2 :].partition(": ")
            if verdict in _VERDICTS:
                return verdict, reason
    return None
