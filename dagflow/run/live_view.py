"""The live terminal view, for every engine: counts per state, per region (or the first matrix axis),
running nodes.

Redrawn at most 4 times a second, from the caller's own loop (the local runner's, or a batch engine's wait
in run/follow.py; no refresh thread)."""

from __future__ import annotations

import time
from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from dagflow.plan import Plan
from dagflow.run.journal import CACHED, FAILED, PENDING, RUNNING, SUCCEEDED, UPSTREAM_FAILED
from dagflow.run.layout import RunLayout
from dagflow.run.reporting import Reporter, RunInfo, summary_lines
from dagflow.run.result import RunResult
from dagflow.text import inert

_STATE_STYLES = {
    SUCCEEDED: "green",
    CACHED: "cyan",
    RUNNING: "yellow",
    "retrying": "yellow",
    "held": "bold magenta",  # batch engines only
    FAILED: "bold red",
    UPSTREAM_FAILED: "red",
    "interrupted": "magenta",
    PENDING: "dim",
}
_MAX_GROUPS = 12
_MAX_RUNNING = 8


def group_axis(plan: Plan) -> str | None:
    """`region` if nodes have it, else the first matrix axis of the first step that fans out."""
    axes = [axis for step in plan.steps.values() for axis in step.axes]
    if "region" in axes:
        return "region"
    return axes[0] if axes else None


class RichReporter(Reporter):
    tick_interval = 0.25

    def __init__(self, console: Console | None = None, runs_dir_hint: str = "") -> None:
        self.console = console or Console()
        self.runs_dir_hint = runs_dir_hint
        self.live: Live | None = None
        self.counts: Counter[str] = Counter()
        self.group_of: dict[str, str] = {}
        self.group_total: Counter[str] = Counter()
        self.group_done: Counter[str] = Counter()
        self.group_running: Counter[str] = Counter()
        self.group_failed: Counter[str] = Counter()
        self.running: dict[str, float] = {}
        self.retrying: set[str] = set()  # to start again (a retry, a checkpoint restart)
        self.held: set[str] = set()  # on hold in a batch system
        self.axis: str | None = None
        self.last_draw = 0.0

    def run_started(self, info: RunInfo) -> None:
        self.info = info
        self.started = time.monotonic()
        self.axis = group_axis(info.plan)
        for name, node in info.plan.nodes.items():
            group = node.coords.get(self.axis, "-") if self.axis else "-"
            self.group_of[name] = group
            self.group_total[group] += 1
        self.counts[PENDING] = len(info.plan.nodes) - len(info.done)
        for name in info.done:
            self.counts[SUCCEEDED] += 1
            self.group_done[self.group_of[name]] += 1
        self.live = Live(self._render(), console=self.console, auto_refresh=False, transient=False)
        self.live.start()

    def _waiting_as(self, name: str) -> str:
        """The count a node that does not run is in: held, retrying or pending (and leaves it)."""
        if name in self.held:
            self.held.discard(name)
            return "held"
        if name in self.retrying:
            self.retrying.discard(name)
            return "retrying"
        return PENDING

    def node_started(self, name: str, attempt: int, gpus: tuple[str, ...]) -> None:
        self.running[name] = time.monotonic()
        self.counts[RUNNING] += 1
        self.counts[self._waiting_as(name)] -= 1
        self.group_running[self.group_of[name]] += 1

    def node_held(self, name: str, why: str | None) -> None:
        if name in self.held:
            return
        if self.running.pop(name, None) is not None:
            self.counts[RUNNING] -= 1
            self.group_running[self.group_of[name]] -= 1
        else:
            self.counts[self._waiting_as(name)] -= 1
        self.held.add(name)
        self.counts["held"] += 1
        reason = f": {why.removeprefix('held: ')}" if why else ""
        self._print(f"held {name}{reason}", "bold magenta")

    def node_finished(
        self, name: str, state: str, attempt: int, rc: int | None, why: str | None, duration: float
    ) -> None:
        group = self.group_of[name]
        if name in self.running:
            del self.running[name]
            self.counts[RUNNING] -= 1
            self.group_running[group] -= 1
        else:  # it ends without having started (a held job removed, a node that could not start)
            self.counts[self._waiting_as(name)] -= 1
        if state in ("retry", "checkpointed"):  # starts again: node_started takes it from "retrying"
            self.counts["retrying"] += 1
            self.retrying.add(name)
            label = "retrying" if state == "retry" else "restarting from its checkpoint:"
            self._print(f"{label} {name}" + (f" ({why})" if why else ""), "yellow")
            return
        self.counts[state] += 1
        if state == SUCCEEDED:
            self.group_done[group] += 1
        elif state == FAILED:
            self.group_failed[group] += 1
            path = RunLayout.from_run_dir(self.info.run_dir).failure_log(name)
            log = f"; see {path}" if path else ""
            self._print(f"failed {name}: {why}{log}", "bold red")

    def node_cached(self, name: str) -> None:
        self.counts[PENDING] -= 1
        self.counts[CACHED] += 1
        self.group_done[self.group_of[name]] += 1

    def nodes_blocked(self, names: list[str], by: str) -> None:
        self.counts[PENDING] -= len(names)
        self.counts[UPSTREAM_FAILED] += len(names)
        for name in names:
            self.group_failed[self.group_of[name]] += 1

    def tick(self) -> None:
        now = time.monotonic()
        if self.live is not None and now - self.last_draw >= self.tick_interval:
            self.last_draw = now
            self.live.update(self._render(), refresh=True)

    def stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def run_finished(self, result: RunResult) -> None:
        if self.live is not None:
            self.running.clear()
            self.live.update(self._render(), refresh=True)
            self.live.stop()
        for line in summary_lines(result, self.runs_dir_hint):
            style = "green" if result.ok else "red" if line.startswith(("run", "  failed")) else None
            self.console.print(Text(line, style=style or ""))

    def _print(self, text: str, style: str) -> None:
        """A line with what a job wrote in it (a hold reason, a why) shown inert (text.py)."""
        if self.live is not None:
            self.live.console.print(Text(inert(text), style=style))

    def _render(self) -> Group:
        total = len(self.info.plan.nodes)
        finished = sum(self.counts[s] for s in (SUCCEEDED, CACHED, FAILED, UPSTREAM_FAILED))
        elapsed = time.monotonic() - self.started
        header = Text.assemble(
            ("dagflow ", "bold"),
            f"{self.info.plan.pipeline} · run {self.info.run_id} · {self.info.placement()} · {elapsed:.0f}s",
        )
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=max(total, 1), completed=finished, width=40), f"{finished}/{total}")
        counts = Text()
        for state, style in _STATE_STYLES.items():
            if self.counts[state] > 0:
                counts.append(f"{state.replace('_', '-')} {self.counts[state]}  ", style=style)
        parts: list = [header, bar, counts]
        if self.axis and len(self.group_total) > 1:
            parts.append(self._groups_table())
        if self.running:
            parts.append(self._running_table())
        return Group(*parts)

    def _groups_table(self) -> Table:
        table = Table(box=None, padding=(0, 2), show_edge=False)
        for column in (self.axis or "group", "done", "running", "failed"):
            table.add_column(column, justify="left" if column == self.axis else "right")
        groups = sorted(
            self.group_total,
            key=lambda g: (-self.group_running[g], self.group_done[g] == self.group_total[g], g),
        )
        for group in groups[:_MAX_GROUPS]:
            failed = self.group_failed[group]
            table.add_row(
                group,
                f"{self.group_done[group]}/{self.group_total[group]}",
                str(self.group_running[group] or ""),
                Text(str(failed), style="red") if failed else "",
            )
        if len(groups) > _MAX_GROUPS:
            table.add_row(f"… {len(groups) - _MAX_GROUPS} more", "", "", "")
        return table

    def _running_table(self) -> Table:
        table = Table(box=None, padding=(0, 2), show_header=False, show_edge=False)
        now = time.monotonic()
        longest = sorted(self.running.items(), key=lambda item: item[1])
        for name, started in longest[:_MAX_RUNNING]:
            table.add_row(Text("▶ " + name, style="yellow"), f"{now - started:.1f}s")
        if len(longest) > _MAX_RUNNING:
            table.add_row(f"  … {len(longest) - _MAX_RUNNING} more running", "")
        return table
