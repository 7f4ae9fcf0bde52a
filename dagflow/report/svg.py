"""The DAG as inline SVG: one box per node (or per group of nodes), coloured by state, edges as curves.

Every text that comes from the run (node, step and matrix names, states) goes through `esc`, so a
hostile value shows as text and never becomes markup.
"""

from __future__ import annotations

from collections import Counter
from html import escape

from dagflow.report.dag_layout import Box, DagLayout
from dagflow.text import plural

# Colours by node state (fill, text); unknown states get the last resort.
STATE_COLOURS: dict[str, str] = {
    "succeeded": "#2e9e5b",
    "cached": "#7cc79a",
    "running": "#2f7ed8",
    "retrying": "#6aa5e8",
    "checkpointed": "#8fb3e0",
    "queued": "#9db7d9",
    "held": "#c678dd",
    "failed": "#d9453d",
    "upstream_failed": "#ef9a48",
    "interrupted": "#9b59b6",
    "pending": "#b8bec6",
}
OTHER_COLOUR = "#888888"
STATE_ORDER = tuple(STATE_COLOURS)


def esc(value: object) -> str:
    """Text safe inside HTML/SVG elements and double- or single-quoted attributes."""
    return escape(str(value), quote=True)


def colour(state: str) -> str:
    return STATE_COLOURS.get(state, OTHER_COLOUR)


def _fit(text: str, width: float, char_width: float = 6.6) -> str:
    most = max(3, int(width / char_width))
    return text if len(text) <= most else text[: most - 1] + "…"


def _ordered_counts(counts: Counter[str]) -> list[tuple[str, int]]:
    known = [(state, counts[state]) for state in STATE_ORDER if counts[state]]
    return known + sorted((state, n) for state, n in counts.items() if state not in STATE_COLOURS and n)


def _box_svg(box: Box, layout: DagLayout, states: dict[str, str]) -> str:
    width, height = layout.box_width, layout.box_height
    counts = Counter(states.get(member, "pending") for member in box.members)
    ordered = _ordered_counts(counts)
    tally = ", ".join(f"{n} {state}" for state, n in ordered)
    title = f"{box.label}\n{box.sublabel}\n{tally}".strip()
    single = len(box.members) == 1
    main_state = ordered[0][0] if single else max(ordered, key=lambda item: item[1])[0]
    parts = [
        f'<g class="box" data-state="{esc(main_state)}" data-members="{len(box.members)}" '
        f'transform="translate({box.x:.1f},{box.y:.1f})"><title>{esc(title)}</title>'
    ]
    if single:
        parts.append(
            f'<rect width="{width:.1f}" height="{height}" rx="6" fill="{colour(main_state)}" stroke="#333" '
            'stroke-width="0.6"/>'
        )
        fg = "#fff" if main_state not in ("pending", "queued", "cached") else "#222"
    else:  # a group: a light box with a bar of its members' states along the bottom
        parts.append(
            f'<rect width="{width:.1f}" height="{height}" rx="6" fill="#f4f6f8" stroke="#333" stroke-width="0.6"/>'
        )
        x = 6.0
        span = width - 12
        total = len(box.members)
        for state, n in ordered:
            part = span * n / total
            parts.append(
                f'<rect x="{x:.1f}" y="{height - 11}" width="{part:.1f}" height="6" fill="{colour(state)}"/>'
            )
            x += part
        fg = "#222"
    parts.append(
        f'<text x="8" y="16" font-size="12" font-weight="600" fill="{fg}">{esc(_fit(box.label, width - 12))}</text>'
    )
    sub = box.sublabel if single else _group_line(box, ordered)
    parts.append(f'<text x="8" y="{30}" font-size="10.5" fill="{fg}">{esc(_fit(sub, width - 12, 6.0))}</text>')
    parts.append("</g>")
    return "".join(parts)


def _group_line(box: Box, ordered: list[tuple[str, int]]) -> str:
    values = " ".join(f"{axis}={value}" for axis, value in box.coords.items())
    shown = " ".join(f"{n} {_SHORT.get(state, state)}" for state, n in ordered)
    return f"{values} {shown}".strip()


_SHORT = {"succeeded": "ok", "upstream_failed": "up-failed", "interrupted": "stopped"}


def _edge_svg(parent: Box, child: Box, layout: DagLayout) -> str:
    x1, y1 = parent.x + layout.box_width, parent.y + layout.box_height / 2
    x2, y2 = child.x, child.y + layout.box_height / 2
    bend = max(20.0, (x2 - x1) / 2)
    return f'<path d="M{x1:.1f},{y1:.1f} C{x1 + bend:.1f},{y1:.1f} {x2 - bend:.1f},{y2:.1f} {x2 - 2:.1f},{y2:.1f}"/>'


def dag_svg(layout: DagLayout, states: dict[str, str], ident: str = "dag") -> str:
    """The whole picture, sized to the layout; the page scales it down to fit when it is wider."""
    width, height = max(layout.width, 120), max(layout.height, 60)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" role="img" '
        f'aria-label="DAG of {plural(layout.nodes, "node")}">',
        f'<defs><marker id="{esc(ident)}-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#667"/></marker></defs>',
        f'<g class="edges" fill="none" stroke="#667" stroke-width="1" marker-end="url(#{esc(ident)}-arrow)" '
        'opacity="0.7">',
    ]
    boxes = layout.boxes
    parts.extend(_edge_svg(boxes[parent], boxes[child], layout) for parent, child in layout.edges)
    parts.append("</g>")
    parts.extend(_box_svg(box, layout, states) for box in boxes)
    parts.append("</svg>")
    return "".join(parts)


def legend_html(states: dict[str, str]) -> str:
    present = Counter(states.values())
    items = [
        f'<span class="chip"><i style="background:{colour(state)}"></i>{esc(state.replace("_", "-"))} {n}</span>'
        for state, n in _ordered_counts(present)
    ]
    return f'<div class="legend">{"".join(items)}</div>'
