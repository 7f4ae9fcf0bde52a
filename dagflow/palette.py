"""The colours of things drawn in several places (the report's SVG charts, matplotlib PNGs), so that one
thing has one colour wherever it is drawn."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

PALETTE = (
    "#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f", "#bab0ac", "#e15759",
)  # fmt: skip


def colours_by_name(names: Iterable[str]) -> dict[str, str]:
    """Each name its colour, in the names' sorted order: independent of the order a drawing meets them in."""
    return {name: PALETTE[index % len(PALETTE)] for index, name in enumerate(sorted(set(names)))}


def region_colours(summary: Mapping[str, Any]) -> dict[str, str]:
    """The colour of each region of a search summary (dagflow.search.report.summarise; "" for a search not
    per region), for its convergence chart in the HTML report and in `search status`'s PNG alike."""
    return colours_by_name([*summary["regions"], *(trial["region"] or "" for trial in summary["trials"])])
