"""The DAG as a PNG, drawn with matplotlib from the same layered layout as the report's SVG, for people
without a browser (`dagflow plan --png`, `dagflow report --png`)."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

from dagflow.files import write_atomic
from dagflow.plan.model import Plan
from dagflow.report.dag_layout import MAX_BOXES, layout_plan
from dagflow.report.svg import STATE_ORDER, colour

DPI = 100
MAX_INCHES = 160  # matplotlib refuses images past 2^16 px a side; stay well under it
PLAIN_FILL = "#dfe8f3"  # boxes of a plan that has not run


def dag_png(plan: Plan, path: Path, states: dict[str, str] | None = None, max_boxes: int = MAX_BOXES) -> Path:
    """Write the DAG to path; with states, boxes are coloured by node state (groups get a state bar)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

    layout = layout_plan(plan, max_boxes)
    width_in = min(MAX_INCHES, max(3.0, layout.width / DPI))
    height_in = min(MAX_INCHES, max(1.5, layout.height / DPI + 0.4))
    figure = plt.figure(figsize=(width_in, height_in), dpi=DPI)
    try:
        axes = figure.add_axes((0, 0, 1, 1))
        axes.set_xlim(0, max(layout.width, 1))
        axes.set_ylim(max(layout.height, 1) + 30, 0)  # y grows downward, as in the SVG; room for the title
        axes.axis("off")
        w, h = layout.box_width, layout.box_height
        font = 9 if layout.width / DPI <= MAX_INCHES else 6
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
            axes.text(box.x + 7, box.y + 15, _fit(box.label, w), fontsize=font, weight="bold", color=ink, va="baseline")
            axes.text(box.x + 7, box.y + 30, _fit(box.sublabel, w), fontsize=font - 1.5, color=ink, va="baseline")
            if states is not None and not single:
                x, span = box.x + 6, w - 12
                for state in sorted(counts, key=_state_rank):
                    part = span * counts[state] / len(box.members)
                    axes.add_patch(Rectangle((x, box.y + h - 11), part, 6, facecolor=colour(state), linewidth=0))
                    x += part
        title = f"{plan.pipeline}: {layout.nodes} nodes" + (f" in {len(layout.boxes)} groups" if layout.grouped else "")
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


def _fit(text: str, width: float) -> str:
    most = max(3, int(width / 6.8))
    return text if len(text) <= most else text[: most - 1] + "…"
