"""A search's part of a report: its best trials, convergence plot and trials table, and the page for a
whole search (`dagflow report --search NAME`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dagflow.report.charts import convergence_svg
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
