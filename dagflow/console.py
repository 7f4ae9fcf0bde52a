"""Consoles and tables for what commands print: fitted to a terminal, never cut when piped."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType
from rich.measure import Measurement
from rich.table import Column, Table

PIPED_WIDTH = 1_000_000  # "no limit": piped output is never folded, cut or ellipsized
FOLD_FLOOR = 8  # a column allowed to break long words still keeps this many cells


def stdout_console() -> Console:
    """A console on stdout: as wide as the terminal, or, when stdout is no terminal (a pipe, a file),
    unlimited, so that a table keeps one row per line and every cell whole whatever COLUMNS says."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


@dataclass(frozen=True)
class FittedTable:
    """A table that, when printed, fits the width it is given without cutting a cell.

    Rich's own shrinking breaks words mid-way ("memor/y") and cuts names to the same prefix; here the
    room is given up in tiers: first every column keeps its longest word (a column in `fold` only
    FOLD_FLOOR cells), then the columns not in `keep` fold down to FOLD_FLOOR, then those in `keep` too,
    and only then anything goes. Every column is set to fold, never to ellipsize, so no text is lost.
    """

    table: Table
    keep: Collection[str] = ()  # header names of columns that give way last (a node's name)
    fold: Collection[str] = ()  # header names of free-text columns that may break long words first

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        _fit(self.table, console, options.max_width, self.keep, self.fold)
        yield self.table


def _fit(table: Table, console: Console, width: int, keep: Collection[str], fold: Collection[str]) -> None:
    for column in table.columns:
        column.overflow = "fold"
        column.width = None  # measured afresh: the same table may be printed again at another width
    content = [_measure(console, column) for column in table.columns]
    room = width - _chrome(table, console, content)
    widths = [measure.maximum for measure in content]
    if sum(widths) <= room:
        return
    names = [str(column.header) for column in table.columns]
    small = [min(measure.minimum, FOLD_FLOOR) for measure in content]
    tiers = (
        [s if name in fold else m.minimum for m, s, name in zip(content, small, names, strict=True)],
        [m.minimum if name in keep else s for m, s, name in zip(content, small, names, strict=True)],
        small,
        [1] * len(widths),
    )
    for floors in tiers:
        widths = _shrink(widths, floors, sum(widths) - room)
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width


def _measure(console: Console, column: Column) -> Measurement:
    """The least width column's text takes without breaking a word, and the most it would take."""
    options = console.options.update_width(PIPED_WIDTH)
    cells = [column.header, *column.cells]
    measures = [Measurement.get(console, options, cell) for cell in cells]
    return Measurement(max(m.minimum for m in measures), max(m.maximum for m in measures))


def _chrome(table: Table, console: Console, content: Sequence[Measurement]) -> int:
    """Cells the table spends on padding and borders."""
    whole = table.__rich_measure__(console, console.options.update_width(PIPED_WIDTH))
    return whole.maximum - sum(measure.maximum for measure in content)


def _shrink(widths: list[int], floors: Sequence[int], excess: int) -> list[int]:
    """widths less up to `excess` cells in all, each column giving in proportion to what it has above
    its floor, none going below it."""
    spare = [max(0, width - floor) for width, floor in zip(widths, floors, strict=True)]
    total = sum(spare)
    if excess <= 0 or total == 0:
        return widths
    take = min(excess, total)
    cuts = [spare_cells * take // total for spare_cells in spare]
    for index in sorted(range(len(widths)), key=lambda i: spare[i] - cuts[i], reverse=True):
        if sum(cuts) >= take:
            break
        if cuts[index] < spare[index]:
            cuts[index] += 1
    return [width - cut for width, cut in zip(widths, cuts, strict=True)]
