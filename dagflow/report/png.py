"""The DAG as a PNG, drawn with matplotlib from the same layered layout as the report's SVG, for people
without a browser (`dagflow plan --png`, `dagflow report --png`)."""

from __future__ import annotations

import bisect
import io
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from dagflow.files import write_atomic
from dagflow.plan.model import Plan
from dagflow.report.dag_layout import LABEL_PAD, MAX_BOXES, Box, layout_plan
from dagflow.report.svg import STATE_ORDER, colour
from dagflow.text import plural

if TYPE_CHECKING:
    from matplotlib.font_manager import FontProperties

DPI = 100
MAX_INCHES = 160  # a side of the picture at most (16,000 px): past it, fewer, bigger groups
FEWER_BOXES = (40, 10)  # the groupings tried, in turn, when max_boxes boxes make too big a picture
PLAIN_FILL = "#dfe8f3"  # boxes of a plan that has not run
LABEL_POINTS = 9  # a box's bold label; its sublabel is 1.5 points smaller


def dag_png(plan: Plan, path: Path, states: dict[str, str] | None = None, max_boxes: int = MAX_BOXES) -> Path:
    """Write the DAG to path; with states, boxes are coloured by node state (groups get a state bar). At most
    max_boxes boxes (dag_layout groups the nodes), fewer where that many would not fit MAX_INCHES a side
    with labels at full size: the picture stays legible, and its cost bounded, at any node count."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

    width_of = _text_width()
    for most in (max_boxes, *(fewer for fewer in FEWER_BOXES if fewer < max_boxes)):
        # a pixel more than the labels take: the figure's size is rounded to whole pixels
        layout = layout_plan(plan, most, lambda box: _label_width(box, LABEL_POINTS, width_of) + 1)
        if max(layout.width, layout.height + 40) / DPI <= MAX_INCHES:
            break
    width_in = min(MAX_INCHES, max(3.0, layout.width / DPI))
    height_in = min(MAX_INCHES, max(1.5, layout.height / DPI + 0.4))
    figure = plt.figure(figsize=(width_in, height_in), dpi=DPI)
    try:
        axes = figure.add_axes((0, 0, 1, 1))
        axes.set_xlim(0, max(layout.width, 1))
        axes.set_ylim(max(layout.height, 1) + 30, 0)  # y grows downward, as in the SVG; room for the title
        axes.axis("off")
        w, h = layout.box_width, layout.box_height
        label_font, sublabel_font = _fonts(LABEL_POINTS)
        room = (w - 2 * LABEL_PAD) * width_in * DPI / max(layout.width, 1)  # px: a data unit is not always one
        for parent, child in layout.edges:
            a, b = layout.boxes[parent], layout.boxes[child]
            axes.add_patch(
                FancyArrowPatch(
                    (a.x + w, a.y + h / 2), (b.x, b.y + h / 2), connectionstyle="arc3,rad=0",
                    arrowstyle="-|>", mutation_scale=9, color="#667", linewidth=0.8, alpha=0.7,
                )
            )  # fmt: skip
        for box in layout.boxes:
            counts = Counter((states or {}).get(member, "pending") for member in box.members)
            single = len(box.members) == 1
            fill = PLAIN_FILL if states is None else (colour(box_state(counts)) if single else "#f4f6f8")
            axes.add_patch(
                FancyBboxPatch((box.x, box.y), w, h, boxstyle="round,pad=0,rounding_size=6", facecolor=fill,
                               edgecolor="#333", linewidth=0.6)
            )  # fmt: skip
            dark = states is not None and single and box_state(counts) not in ("pending", "queued", "cached")
            ink = "white" if dark else "#1d2329"
            for text, font, baseline in ((box.label, label_font, 15), (box.sublabel, sublabel_font, 30)):
                shown = _fit(text, room, lambda part, font=font: width_of(part, font))
                axes.text(box.x + LABEL_PAD, box.y + baseline, shown, fontproperties=font, color=ink,
                          va="baseline", parse_math=False)  # fmt: skip
            if states is not None and not single:
                x, span = box.x + 6, w - 12
                for state in sorted(counts, key=_state_rank):
                    part = span * counts[state] / len(box.members)
                    axes.add_patch(Rectangle((x, box.y + h - 11), part, 6, facecolor=colour(state), linewidth=0))
                    x += part
        groups = f" in {len(layout.boxes)} groups" if layout.grouped else ""
        title = f"{plan.pipeline}: {plural(layout.nodes, 'node')}{groups}"
        axes.text(8, layout.height + 20, title, fontsize=9, color="#555")
        png = io.BytesIO()
        figure.savefig(png, format="png", dpi=DPI, facecolor="white")
        write_atomic(path, png.getvalue())
    finally:
        plt.close(figure)
    return path


def box_state(counts: Counter[str]) -> str:
    return max(counts, key=lambda state: (counts[state], -_state_rank(state)))


def _state_rank(state: str) -> int:
    return STATE_ORDER.index(state) if state in STATE_ORDER else len(STATE_ORDER)


def _fonts(points: float) -> tuple[FontProperties, FontProperties]:
    """A box's label font and its sublabel font."""
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=points, weight="bold"), FontProperties(size=points - 1.5)


def _text_width() -> Callable[[str, FontProperties], float]:
    """Pixels a text takes in a font, measured by the renderer that draws the PNG (DejaVu Sans Bold is far
    wider than any per-character guess for letters like m and w)."""
    from matplotlib.backends.backend_agg import RendererAgg

    renderer = RendererAgg(1, 1, DPI)

    def width(text: str, font: FontProperties) -> float:
        return float(renderer.get_text_width_height_descent(text, font, ismath=False)[0])

    return width


def _label_width(box: Box, points: float, width_of: Callable[[str, FontProperties], float]) -> float:
    label_font, sublabel_font = _fonts(points)
    return max(width_of(box.label, label_font), width_of(box.sublabel, sublabel_font))


def _fit(text: str, room: float, width_of: Callable[[str], float]) -> str:
    """text, or its longest start that fits room px with an ellipsis after it."""
    if width_of(text) <= room:
        return text
    too_wide = bisect.bisect_left(range(len(text)), True, key=lambda keep: width_of(text[:keep] + "…") > room)
    return text[: max(too_wide - 1, 0)] + "…"
