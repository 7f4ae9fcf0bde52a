"""`dagflow status` as text: the run's state, counts per node state, and a table of nodes."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from dagflow.run.journal import CACHED, SUCCEEDED
from dagflow.run.status import RUN_RUNNING, RUN_STOPPED, RunStatus

_STYLES = {
    "succeeded": "green",
    "cached": "cyan",
    "running": "yellow",
    "retrying": "yellow",
    "failed": "bold red",
    "upstream_failed": "red",
    "interrupted": "magenta",
    "pending": "dim",
}
SMALL_RUN = 50  # runs with at most this many nodes list every node by default


def print_status(status: RunStatus, show_all: bool, runs_dir_hint: str = "", console: Console | None = None) -> None:
    console = console or Console()
    states = status.node_states()
    counts = status.counts()
    console.print(
        Text.assemble(
            ("run ", "bold"),
            (status.run_id, "bold"),
            f"  {status.plan.pipeline}  ",
            (status.state, _STYLES.get(status.state, "bold")),
            f"  {status.layout.run_dir}",
        )
    )
    summary = Text()
    for state, count in counts.items():
        summary.append(f"{state.replace('_', '-')} {count}  ", style=_STYLES.get(state, ""))
    summary.append(f"(total {len(states)})")
    console.print(summary)

    show_every = show_all or len(states) <= SMALL_RUN
    table = Table(box=None, padding=(0, 2), show_edge=False)
    for column in ("node", "state", "attempts", "exit", "time", "why"):
        table.add_column(column, justify="right" if column in ("attempts", "exit", "time") else "left")
    hidden = 0
    for name, state in states.items():
        if not show_every and state in (SUCCEEDED, CACHED, "pending"):
            hidden += 1
            continue
        record = status.record(name)
        duration = status.duration(record)
        table.add_row(
            name,
            Text(state.replace("_", "-"), style=_STYLES.get(state, "")),
            str(record.attempts or ""),
            "" if record.rc is None else str(record.rc),
            "" if duration is None else f"{duration:.1f}s",
            record.why or "",
        )
    if table.row_count:
        console.print(table)
    if hidden:
        console.print(Text(f"({hidden} succeeded, cached or pending nodes not shown; --all lists them)", style="dim"))
    if status.state == RUN_STOPPED or (status.state not in (RUN_RUNNING, "succeeded") and status.journal.runners):
        console.print(f"resume with: dagflow run --resume {status.run_id}{runs_dir_hint}")
