"""`dagflow status` as text: the run's state, counts per node state, and a table of nodes."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
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
    "queued": "blue",
    "held": "bold magenta",
}
SMALL_RUN = 50  # runs with at most this many nodes list every node by default
PROGRESS_VALUES = 24  # axes with more values than this get one summary line, not one entry per value
STDERR_SHOWN = 3  # failed nodes whose stderr tail the view prints


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
    reason = status.extra.get("dagman_reason")
    if reason:  # why DAGMan stopped, when it did so before (or instead of) running nodes
        console.print(Text.assemble(("DAGMan: ", "bold red"), (str(reason), "red")))
    summary = Text()
    for state, count in counts.items():
        summary.append(f"{state.replace('_', '-')} {count}  ", style=_STYLES.get(state, ""))
    summary.append(f"(total {len(states)})")
    console.print(summary)
    for note in status.notes:
        console.print(Text(note, style="dim"))
    _print_progress(status, states, console)

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
    for name, tail in list(status.failed_stderr(states).items())[:STDERR_SHOWN]:
        console.print(Text(f"stderr of {name} (last {len(tail)} lines):", style="bold red"))
        for line in tail:
            console.print(Text("  " + line))
    if status.state == RUN_STOPPED or (status.state not in (RUN_RUNNING, "succeeded") and status.journal.runners):
        hint = status.resume_hint or f"dagflow run --resume {status.run_id}"
        console.print(f"resume with: {hint}{runs_dir_hint}")


def _print_progress(status: RunStatus, states: dict[str, str], console: Console) -> None:
    """One line per matrix axis: done/total per value (e.g. `region  us 3/4  br 2/4 (1 failed)`)."""
    for axis, values in status.progress(states).items():
        line = Text(f"{axis}  ", style="bold")
        if len(values) > PROGRESS_VALUES:
            done = sum(1 for tally in values.values() if tally["done"] == tally["total"])
            failed = sum(1 for tally in values.values() if tally["failed"])
            line.append(f"{done}/{len(values)} values done" + (f", {failed} with failures" if failed else ""))
        else:
            for value, tally in values.items():
                style = "red" if tally["failed"] else ("green" if tally["done"] == tally["total"] else "")
                line.append(f"{value} {tally['done']}/{tally['total']}", style=style)
                line.append(f" ({tally['failed']} failed)  " if tally["failed"] else "  ", style=style)
        console.print(line)


def watch_status(
    read: Callable[[], RunStatus], show_all: bool, runs_dir_hint: str = "", interval_s: float = 2.0
) -> None:
    """Redraw the status in place every interval_s until the run is no longer running (or Ctrl-C)."""
    console = Console()

    def render() -> tuple[Text, bool]:
        status = read()
        buffer = Console(file=io.StringIO(), force_terminal=console.is_terminal, width=console.width)
        print_status(status, show_all, runs_dir_hint, console=buffer)
        return Text.from_ansi(buffer.file.getvalue().rstrip("\n")), status.state == RUN_RUNNING  # type: ignore[attr-defined]

    view, running = render()
    try:
        with Live(view, console=console, auto_refresh=False, transient=False) as live:
            while running:
                time.sleep(interval_s)
                view, running = render()
                live.update(view, refresh=True)
    except KeyboardInterrupt:
        pass
