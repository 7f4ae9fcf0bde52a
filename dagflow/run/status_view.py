"""`dagflow status` as text: the run's state, counts per node state, and a table of nodes."""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dagflow.console import FittedTable, stdout_console
from dagflow.run.journal import CACHED, SUCCEEDED
from dagflow.run.status import RUN_RUNNING, RUN_STOPPED, RunStatus
from dagflow.run.usage import NodeUsage
from dagflow.text import inert

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
    console = console or stdout_console()
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
        console.print(Text.assemble(("DAGMan: ", "bold red"), (inert(str(reason)), "red")))
    summary = Text()
    for state, count in counts.items():
        summary.append(f"{state.replace('_', '-')} {count}  ", style=_STYLES.get(state, ""))
    summary.append(f"(total {len(states)})")
    console.print(summary)
    for note in status.notes:
        console.print(Text(inert(note), style="dim"))
    _print_progress(status, states, console)

    show_every = show_all or len(states) <= SMALL_RUN
    shown = [name for name, state in states.items() if show_every or state not in (SUCCEEDED, CACHED, "pending")]
    hidden = len(states) - len(shown)
    usage = status.usage(shown)
    used_column = console.width >= USED_MIN_WIDTH and any(name in usage for name in shown)
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    columns = ("node", "state", "attempts", "exit", "time", *(USED_COLUMNS if used_column else ()), "why")
    for column in columns:
        table.add_column(column, justify="left" if column in ("node", "state", "why") else "right")
    for name in shown:
        state = states[name]
        record = status.record(name)
        duration = status.duration(record)
        used = used_cells(usage.get(name)) if used_column else ()
        table.add_row(
            name,
            Text(state.replace("_", "-"), style=_STYLES.get(state, "")),
            str(record.attempts or "") + (f" ({record.restarts} restarts)" if record.restarts else ""),
            "" if record.rc is None else str(record.rc),
            "" if duration is None else f"{duration:.1f}s",
            *used,
            inert(record.why or ""),
        )
    if table.row_count:
        console.print(FittedTable(table, keep=("node",), fold=("why",)))
        if used_column:
            console.print(Text("(cpus, mem MB: used/requested by the latest attempt)", style="dim"))
    if hidden:
        console.print(Text(f"({hidden} succeeded, cached or pending nodes not shown; --all lists them)", style="dim"))
    for name, tail in list(status.failed_stderr(states).items())[:STDERR_SHOWN]:
        console.print(Text(f"stderr of {name} (last {len(tail)} lines):", style="bold red"))
        for line in tail:
            console.print(Text("  " + inert(line)))
    if status.state == RUN_STOPPED or (status.state not in (RUN_RUNNING, "succeeded") and status.journal.runners):
        hint = status.resume_hint or f"dagflow run --resume {status.run_id}"
        console.print(f"resume with: {hint}{runs_dir_hint}")


USED_COLUMNS = ("cpus", "mem MB")  # used/requested by the latest attempt (a note under the table says so)
USED_MIN_WIDTH = 100  # a narrower terminal keeps the table without them (status --json has them all)


def used_cells(usage: NodeUsage | None) -> tuple[str, str]:
    """A node's latest attempt: CPU cores it kept busy (CPU time / wall time) and its peak memory, each
    against its request (`0.9/2`, `212/1024`); blank where not measured."""
    if usage is None:
        return "", ""
    cpus_asked = _number(usage.requested.get("cpus"))
    memory_asked = _number(usage.requested.get("memory_mb"))
    cores = usage.cpu_s / usage.wall_s if usage.cpu_s is not None and usage.wall_s else None
    cpus = f"{cores:.1f}/{cpus_asked}" if cores is not None else ""
    memory = f"{usage.peak_memory_mb:.0f}/{memory_asked}" if usage.peak_memory_mb is not None else ""
    return cpus, memory


def _number(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:g}"


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
    console = stdout_console()

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
