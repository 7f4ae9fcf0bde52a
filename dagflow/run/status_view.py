"""`dagflow status` as text: the run's state, counts per node state, and a table of nodes."""

from __future__ import annotations

import io
import time
from collections import Counter
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from dagflow.console import FittedTable, stdout_console
from dagflow.run.promotions import promotion_lines
from dagflow.run.status import (
    QUIET_STATES,
    ROW_LIMIT,
    ROW_PRIORITY,
    RUN_RUNNING,
    RUN_STOPPED,
    SMALL_RUN,
    RunStatus,
    rows_to_show,
)
from dagflow.run.step_table import StepRow, rows_to_list
from dagflow.run.usage import NodeUsage
from dagflow.text import inert, plural

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
PROGRESS_VALUES = 24  # axes with more values than this get one summary line, not one entry per value
STDERR_SHOWN = 3  # failed nodes whose stderr tail the view prints


def print_status(status: RunStatus, show_all: bool, runs_dir_hint: str = "", console: Console | None = None) -> None:
    """The run's state and counts, then its nodes: every node of a small run (or with show_all); else those
    not succeeded, cached or pending, at most ROW_LIMIT of them (the failed and held first)."""
    console = console or stdout_console()
    if show_all or status.total <= SMALL_RUN:
        states = status.node_states()
        counts, progress, total = status.counts(states), status.progress(states), len(states)
        shown = list(states)
        listed = {name: (state, status.record(name)) for name, state in states.items()}
    else:
        summary = status.summarize()
        counts, progress, total, listed = summary.counts, summary.progress, summary.total, summary.listed
        shown = rows_to_show(listed, ROW_LIMIT)
        states = None  # the summary's (status.failed_stderr reads its failed nodes)
    console.print(
        Text.assemble(
            ("run ", "bold"),
            (status.run_id, "bold"),
            f"  {status.pipeline}  ",
            (status.state, _STYLES.get(status.state, "bold")),
            f"  {status.layout.run_dir}",
        )
    )
    reason = status.extra.get("dagman_reason")
    if reason:  # why DAGMan stopped, when it did so before (or instead of) running nodes
        console.print(Text.assemble(("DAGMan: ", "bold red"), (inert(str(reason)), "red")))
    summary_line = Text()
    for state, count in counts.items():
        summary_line.append(f"{state.replace('_', '-')} {count}  ", style=_STYLES.get(state, ""))
    summary_line.append(f"(total {total})")
    console.print(summary_line)
    for note in status.notes:
        console.print(Text(inert(note), style="dim"))
    _print_progress(progress, console)
    if total > SMALL_RUN:
        _print_steps(status.steps(states), console)

    hidden = total - len(listed)
    more = Counter(listed[name][0] for name in set(listed).difference(shown)) if len(shown) < len(listed) else {}
    usage = status.usage(shown)
    used_column = console.width >= USED_MIN_WIDTH and any(name in usage for name in shown)
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    columns = ("node", "state", "attempts", "exit", "time", *(USED_COLUMNS if used_column else ()), "why")
    for column in columns:
        table.add_column(column, justify="left" if column in ("node", "state", "why") else "right")
    for name in shown:
        state, record = listed[name]
        duration = status.duration(record)
        used = used_cells(usage.get(name)) if used_column else ()
        table.add_row(
            name,
            Text(state.replace("_", "-"), style=_STYLES.get(state, "")),
            str(record.attempts or "") + (f" ({record.restarts} restarts)" if record.restarts else ""),
            "" if record.rc is None else str(record.rc),
            _seconds(duration),
            *used,
            inert(record.why or ""),
        )
    if table.row_count:
        console.print(FittedTable(table, keep=("node",), fold=("why",)))
        if used_column:
            console.print(Text("(cpus, mem MB: used/requested by the latest attempt)", style="dim"))
    if more:
        by_state = ", ".join(f"{count} {state.replace('_', '-')}" for state, count in _in_state_order(more))
        line = f"... and {plural(sum(more.values()), 'more node')} ({by_state}) not listed; --all lists every node"
        console.print(Text(line, style="dim"))
    if hidden:
        console.print(Text(f"({hidden} succeeded, cached or pending nodes not shown; --all lists them)", style="dim"))
    for name, tail in list(status.failed_stderr(states).items())[:STDERR_SHOWN]:
        console.print(Text(f"stderr of {name} (last {len(tail)} lines):", style="bold red"))
        for line in tail:
            console.print(Text("  " + inert(line)))
    for line in promotion_lines(status.promotions()):
        console.print(Text(inert(line)))
    if status.state == RUN_STOPPED or (status.state not in (RUN_RUNNING, "succeeded") and status.journal.runners):
        hint = status.resume_hint or f"dagflow run --resume {status.run_id}"
        console.print(f"resume with: {hint}{runs_dir_hint}")


def _print_steps(rows: list[StepRow], console: Console) -> None:
    """One row per step (at most step_table.STEP_ROW_LIMIT, those with nodes not done first): its nodes by
    state, its wall time (first start to last end) and its slowest node."""
    shown = rows_to_list(rows, QUIET_STATES)
    states = list(dict.fromkeys(state for row in rows for state in row.counts))
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_edge=False)
    headers = ("step", "nodes", *(state.replace("_", "-") for state in states), "wall", "slowest node", "took")
    for header in headers:
        table.add_column(header, justify="left" if header in ("step", "slowest node") else "right")
    for row in shown:
        counts = [Text(str(row.counts.get(state) or ""), style=_STYLES.get(state, "")) for state in states]
        table.add_row(
            inert(row.step),
            str(row.nodes),
            *counts,
            _seconds(row.wall_s),
            inert(row.slowest or ""),
            _seconds(row.slowest_s),
        )
    console.print(FittedTable(table, keep=("step",), fold=("slowest node",)))
    if len(shown) < len(rows):
        listed = {row.step for row in shown}
        more = [row for row in rows if row.step not in listed]
        line = f"... and {plural(len(more), 'more step')} ({plural(sum(row.nodes for row in more), 'node')}) " \
            "not listed; status --json has every step"
        console.print(Text(line, style="dim"))


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}s"


def _in_state_order(counts: dict[str, int]) -> list[tuple[str, int]]:
    rank = {state: position for position, state in enumerate(ROW_PRIORITY)}
    return sorted(counts.items(), key=lambda item: (rank.get(item[0], len(ROW_PRIORITY)), item[0]))


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


def _print_progress(progress: dict[str, dict[str, dict[str, int]]], console: Console) -> None:
    """One line per matrix axis: done/total per value (e.g. `region  us 3/4  br 2/4 (1 failed)`)."""
    for axis, values in progress.items():
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
