"""A search's part of a report: its best trials, convergence plot and trials table, and the page for a
whole search (`dagflow report --search NAME`). The convergence plot is inline SVG: best so far against
trial number, one line per region, each successful trial a dot (hollow where it is infeasible), the
region's best (dagflow.search.best) a star: the same picture as `dagflow search status`'s PNG."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from dagflow.palette import region_colours
from dagflow.report.page import page, state_badge, value_cell
from dagflow.report.svg import esc
from dagflow.text import plural


def search_section(summary: dict[str, Any]) -> str:
    """The search's best per region, its convergence plot and its trials, as `dagflow search status` shows
    them (the best is best.reported_best's; a feasibility column where the search is constrained)."""
    from dagflow.search.report import best_line
    from dagflow.search.scheduler import params_text

    per_region = any(trial["region"] for trial in summary["trials"])
    constrained = bool(summary.get("constrained"))
    rows = []
    for trial in summary["trials"]:
        params = params_text(trial["params"])
        region = f"<td>{esc(trial['region'] or '')}</td>" if per_region else ""
        feasibility = f"<td>{esc(trial.get('feasible') or '')}</td>" if constrained else ""
        rows.append(
            f"<tr><td class=\"num\" data-v=\"{trial['trial']}\">t{trial['trial']}</td>{region}"
            f"<td>{state_badge(str(trial['state']))}</td>{value_cell(trial['value'])}{feasibility}<td>{esc(params)}</td>"
            f"<td>{esc(trial['run_id'])}</td><td>{esc(trial.get('error') or '')}</td>"
            f"<td>{esc(trial.get('stopped_because') or '')}</td></tr>"
        )
    best = []
    for region, info in summary["regions"].items():
        where = f"{region}: " if region else ""
        best.append(f"<li>{esc(where)}{esc(best_line(summary, info))}</li>")
    this = summary.get("this_trial")
    lead = (
        f'<p class="muted">search <b>{esc(summary["search"])}</b> ({esc(summary["kind"])} {esc(summary["source"])}): '
        f"{esc(summary['goal'])} {esc(summary['metric'])}, budget {summary['budget']}, parallel {summary['parallel']}, "
        f"optimiser {esc(summary.get('optimizer'))}"
        + (f"; this run is trial t{esc(this['number'])}" if this else "")
        + "</p>"
    )
    region_head = "<th>region</th>" if per_region else ""
    feasible_head = "<th>feasible</th>" if constrained else ""
    table = (
        f'<table class="sortable"><thead><tr><th>trial</th>{region_head}<th>state</th><th>{esc(summary["metric"])}</th>'
        f"{feasible_head}<th>params</th><th>run</th><th>error</th><th>stopped because</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return (
        f'<section id="search"><h2>Search</h2>{lead}<ul>{"".join(best)}</ul><h3>Convergence</h3>'
        f"{convergence_svg(summary)}<h3>Trials</h3>{table}</section>"
    )


def render_search(summary: dict[str, Any]) -> str:
    states = Counter(trial["state"] for trial in summary["trials"])
    counts = " · ".join(f"{n} {esc(state)}" for state, n in states.items())
    header = (
        f'<header><h1>Search {esc(summary["search"])}</h1><div class="meta">{plural(len(summary["trials"]), "trial")} '
        f"({counts})</div></header>"
    )
    return page(f"dagflow search {summary['search']}", header, "", search_section(summary))


WIDTH, HEIGHT = 720, 360
LEFT, RIGHT, TOP, BOTTOM = 70, 150, 20, 40


def _ticks(low: float, high: float, count: int = 8) -> list[float]:
    if high <= low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def convergence_svg(summary: dict[str, Any]) -> str:
    dots_by_region: dict[str, list[tuple[float, float]]] = {}
    infeasible: set[tuple[str, float]] = set()  # (region, trial number) of the hollow dots
    for trial in summary["trials"]:
        value = trial["value"]
        if trial["state"] == "succeeded" and isinstance(value, int | float) and math.isfinite(value):
            dots_by_region.setdefault(trial["region"] or "", []).append((float(trial["trial"]), float(value)))
            if trial.get("feasible") not in (None, "yes"):
                infeasible.add((trial["region"] or "", float(trial["trial"])))
    curves = {
        region: [(float(x), float(y)) for x, y in info["best_so_far"] if y is not None]
        for region, info in summary["regions"].items()
    }
    points = [p for dots in dots_by_region.values() for p in dots] + [p for c in curves.values() for p in c]
    if not points:
        return '<p class="muted">No trial has succeeded yet: nothing to plot.</p>'
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_low, x_high = min(min(xs), 1.0), max(max(xs), 2.0)
    y_low, y_high = min(ys), max(ys)
    if y_high == y_low:
        y_low, y_high = y_low - 1, y_high + 1
    pad = (y_high - y_low) * 0.05
    y_low, y_high = y_low - pad, y_high + pad
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y: float) -> float:
        return TOP + (y_high - y) / (y_high - y_low) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="convergence" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#999"/>',
    ]
    for y in _ticks(y_low, y_high):
        parts.append(
            f'<line x1="{LEFT}" x2="{LEFT + plot_w}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#e3e3e3"/>'
            f'<text x="{LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.4g}</text>'
        )
    for x in _ticks(x_low, x_high):
        if x == int(x):
            parts.append(f'<text x="{sx(x):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{int(x)}</text>')
    parts.append(f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">trial</text>')
    metric = f"{summary.get('metric') or 'objective'} ({summary.get('goal')})"
    parts.append(
        f'<text transform="translate(14,{TOP + plot_h / 2}) rotate(-90)" text-anchor="middle">{esc(metric)}</text>'
    )
    colours = region_colours(summary)
    for index, region in enumerate(sorted(set(curves) | set(dots_by_region))):
        colour = colours[region]
        curve = curves.get(region, [])
        if curve:
            path = [f"M{sx(curve[0][0]):.1f},{sy(curve[0][1]):.1f}"]
            for x1, y1 in curve[1:]:
                path.append(f"H{sx(x1):.1f}V{sy(y1):.1f}")
            path.append(f"H{sx(x_high):.1f}")
            parts.append(f'<path d="{"".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in dots_by_region.get(region, []):
            hollow = (region, x) in infeasible
            fill = f'fill="none" stroke="{colour}"' if hollow else f'fill="{colour}"'
            parts.append(
                f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" {fill} opacity="0.6">'
                f"<title>trial {int(x)}: {y:.6g}{' (infeasible)' if hollow else ''}</title></circle>"
            )
        best = (summary["regions"].get(region) or {}).get("best")
        if best and isinstance(best.get("value"), int | float) and math.isfinite(best["value"]):
            bx, by = sx(float(best["trial"])), sy(float(best["value"]))
            parts.append(
                f'<text x="{bx:.1f}" y="{by + 5:.1f}" text-anchor="middle" font-size="16" fill="{colour}">★'
                f"<title>best: trial {best['trial']}: {best['value']:.6g}</title></text>"
            )
        label = region or summary.get("search") or "search"
        ly = TOP + 14 + index * 16
        parts.append(
            f'<rect x="{LEFT + plot_w + 12}" y="{ly - 9}" width="10" height="10" fill="{colour}"/>'
            f'<text x="{LEFT + plot_w + 26}" y="{ly}">{esc(label)} best so far</text>'
        )
    parts.append("</svg>")
    return "".join(parts)
