"""One loop's decision as readable tables (rich), for the log and for --dry-run."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table

from dagflow.autoscale.decide import Decision, Unplaced


def _unplaced_table(title: str, rows: list[Unplaced]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("jobs", "e.g.", "request", "requirements", "why"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(str(row.count), " ".join(row.examples), row.request, row.requirements, row.reason)
    return table


def render(decision: Decision, done: list[str], errors: list[str], header: str, width: int = 160) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, force_terminal=False, color_system=None)
    console.print(
        f"{header}: {decision.total_jobs} idle jobs, pool of {decision.pool_size} nodes, "
        f"scale-in limit {decision.scale_in_limit} this loop"
    )
    table = Table(title_justify="left")
    for column in (
        "group",
        "region",
        "type",
        "spot",
        "min..max",
        "desired",
        "live",
        "busy",
        "idle",
        "removing",
        "booting",
        "jobs",
        "new",
        "target",
        "notes",
    ):
        table.add_column(column, overflow="fold", justify="left" if column in ("group", "notes") else "right")
    for plan in decision.plans.values():
        group = plan.group
        table.add_row(
            group.name,
            group.region,
            group.instance_type,
            "yes" if group.spot else "no",
            f"{group.min_size}..{group.max_size}",
            str(plan.desired),
            str(plan.live),
            str(plan.busy),
            str(plan.idle),
            str(plan.removing),
            str(plan.booting),
            str(plan.jobs),
            str(plan.new),
            str(plan.target),
            "; ".join(plan.notes),
        )
    console.print(table)
    if done:
        console.print("actions:")
        for line in done:
            console.print(f"  {line}", markup=False, highlight=False)
    else:
        console.print("actions: none")
    for line in errors:
        console.print(f"  error: {line}", markup=False, highlight=False)
    if decision.unmatched:
        console.print(_unplaced_table("jobs that match no group (they would sit idle forever)", decision.unmatched))
    if decision.unsatisfied:
        console.print(_unplaced_table("jobs that matching groups cannot take now", decision.unsatisfied))
    return buffer.getvalue()
