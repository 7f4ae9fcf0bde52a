"""The run report as one self-contained HTML page (inline CSS, SVG and one small script, nothing fetched):
the DAG, the timeline, resources per step, metrics and promotions per region, the search, the nodes."""

from __future__ import annotations

import json
from collections import Counter

from dagflow.report.collect import RunReport
from dagflow.report.dag_layout import MAX_BOXES, DagLayout, layout_plan
from dagflow.report.page import (
    TEXT_CELL,
    duration_text,
    number_text,
    page,
    share_bar,
    state_badge,
    utc_time,
    value_cell,
)
from dagflow.report.resources import size_text, step_uses, waste_lines
from dagflow.report.search_html import search_section
from dagflow.report.svg import dag_svg, esc, legend_html
from dagflow.report.timeline import place_name, spans_of, step_colours, timeline_svg
from dagflow.run.status import SMALL_RUN
from dagflow.run.usage import latest_by_node
from dagflow.text import plural

METRIC_COLUMNS = 12
METRIC_ROWS = 2000
OPEN_NODE_TABLE = 200  # node (and step) tables up to this size start unfolded
WASTE_LINES = 20  # steps whose unused requests are called out one by one
FIT_WIDTH = 1100  # px: wider DAG pictures start scaled down to the page


def _header(report: RunReport) -> str:
    total = len(report.plan.nodes)
    elapsed = (report.finished or report.made) - report.started if report.started else None
    counts = " · ".join(f"{n} {esc(state.replace('_', '-'))}" for state, n in report.counts.items())
    return (
        f"<header><h1>Run {esc(report.run_id)}</h1><div class=\"meta\">pipeline <b>{esc(report.pipeline)}</b> · "
        f"engine {esc(report.engine)} · <b>{esc(report.state)}</b> · {plural(total, 'node')} ({counts}) · "
        f"started {utc_time(report.started)} · took {duration_text(elapsed)}</div>"
        f'<div class="meta">{esc(report.run_dir)}</div></header>'
    )


def _nav(report: RunReport) -> str:
    links = [("dag", "DAG"), *([("steps", "Steps")] if _has_steps(report) else []), ("timeline", "Timeline"),
             ("resources", "Resources")]
    if report.metrics or report.promotions or report.model_trials:
        links.append(("regions", "Metrics & promotions"))
    if report.search is not None:
        links.append(("search", "Search"))
    links.append(("nodes", "Nodes"))
    return "<nav>" + "".join(f'<a href="#{anchor}">{text}</a>' for anchor, text in links) + "</nav>"


def _dag_section(report: RunReport) -> str:
    layout = layout_plan(report.plan, MAX_BOXES)
    legend = legend_html(report.states)
    if not layout.grouped:
        picture = _dag_picture(layout, report.states, "dag-nodes")
        return f'<section id="dag"><h2>DAG</h2>{legend}<p class="muted">One box per node.</p>{picture}</section>'
    parts = [f'<section id="dag"><h2>DAG</h2>{legend}']
    overview = layout_plan(report.plan, min(len(report.plan.steps), MAX_BOXES))
    if len(overview.boxes) < len(layout.boxes):
        parts.append(
            f'<p class="muted">{layout.nodes} nodes, one box per step; each bar shows its nodes\' states '
            "(hover for counts).</p>" + _dag_picture(overview, report.states, "dag-steps")
        )
    axes = sorted({axis for box in layout.boxes for axis in box.coords})
    by = "step" + "".join(f" and {esc(axis)}" for axis in axes)
    if any(len(box.steps) > 1 for box in layout.boxes):
        by = "layer and step name (less its trailing number)"
    opened = "" if len(overview.boxes) < len(layout.boxes) else " open"
    parts.append(
        f"<details{opened}><summary>{layout.nodes} nodes as {len(layout.boxes)} boxes, grouped by {by}</summary>"
        f'{_dag_picture(layout, report.states, "dag-groups")}</details>'
        '<p class="muted">Every node is in the node table below.</p></section>'
    )
    return "".join(parts)


def _dag_picture(layout: DagLayout, states: dict[str, str], ident: str) -> str:
    fit = layout.width > FIT_WIDTH
    toggle = (
        f'<label class="muted"><input type="checkbox" class="dag-fit" data-for="{ident}"{" checked" if fit else ""}>'
        " fit to width</label>"
    )
    return f'{toggle}<div class="scroll{" fit" if fit else ""}" id="{ident}">{dag_svg(layout, states, ident)}</div>'


def _timeline_section(report: RunReport) -> str:
    steps = {name: node.step for name, node in report.plan.nodes.items()}
    spans = spans_of(report.usage, report.records, steps)
    hosts = len({span.host for span in spans})
    lead = (
        f'<p class="muted">{plural(len(spans), "attempt")} on {plural(hosts, "machine")}; one lane per slot '
        "(lanes are packed where the engine names no slot); a red outline marks a failed attempt.</p>"
    )
    sizes = Counter(node.step for node in report.plan.nodes.values())  # steps in DAG order
    picture = timeline_svg(spans, *step_colours(sizes))
    return f'<section id="timeline"><h2>Timeline</h2>{lead}{picture}</section>'


def _resources_section(report: RunReport) -> str:
    uses = step_uses(report.plan, report.usage)
    rows = []
    callouts = []
    for use in uses:
        walls = sorted(use.wall_s)
        median = walls[len(walls) // 2] if walls else None
        gpu_mem = (
            f"{size_text(use.gpu_memory_mb) if use.gpu_memory_mb else '—'} / "
            f"{size_text(use.peak_gpu_memory) if use.peak_gpu_memory is not None else '—'}"
        )
        rows.append(
            f"<tr><td>{esc(use.step)}</td><td class=\"num\">{use.nodes}</td><td class=\"num\">{use.attempts}</td>"
            f"<td class=\"num\" data-v=\"{use.cpus}\">{use.cpus:g} / {number_text(use.mean_cores, 3)}</td>"
            f"<td class=\"num\" data-v=\"{use.memory_mb}\">{size_text(use.memory_mb)} / "
            f"{size_text(use.peak_memory) if use.peak_memory is not None else '—'}</td>"
            f"<td>{share_bar(use.peak_memory, use.memory_mb)}</td>"
            f"<td class=\"num\">{use.gpus:g}</td><td class=\"num\">{gpu_mem}</td>"
            f"<td class=\"num\">{number_text(use.mean_gpu_utilization, 3)}</td>"
            f"<td class=\"num\" data-v=\"{median or 0}\">{duration_text(median)} / "
            f"{duration_text(walls[-1] if walls else None)}</td>{_placement_cell(report, use.step)}</tr>"
        )
        for line in waste_lines(use):
            callouts.append(f"<li><b>{esc(use.step)}</b>: {esc(line)}</li>")
    measured = sum(use.attempts for use in uses)
    lead = (
        f'<p class="muted">{measured} measured attempts (usage.jsonl). Requested / used: CPUs asked / cores busy on '
        "average (CPU time ÷ wall time), memory asked / the highest peak of any attempt, GPU memory likewise.</p>"
    )
    if not measured:
        lead = '<p class="muted">No usage records in this run (usage.jsonl is empty or missing): requests only.</p>'
    waste = '<p class="muted">No request went mostly unused.</p>'
    if callouts:
        more = len(callouts) - WASTE_LINES
        tail = f'<li class="muted">… and {more} more (the table has every step)</li>' if more > 0 else ""
        waste = f'<ul class="waste">{"".join(callouts[:WASTE_LINES])}{tail}</ul>'
    table = (
        '<table class="sortable"><thead><tr><th>step</th><th>nodes</th><th>attempts</th><th>CPUs asked / used</th>'
        "<th>memory asked / peak</th><th>peak vs request</th><th>GPUs</th><th>GPU memory asked / peak</th>"
        "<th>GPU util %</th><th>wall median / max</th><th>auto requests, requirements, ClassAds</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if len(rows) > OPEN_NODE_TABLE:
        table = f"<details><summary>{plural(len(rows), 'step')}</summary>{table}</details>"
    return f'<section id="resources"><h2>Resources per step: used against requested</h2>{lead}{waste}{table}</section>'


def _placement_cell(report: RunReport, step_name: str) -> str:
    step = report.plan.steps.get(step_name)
    if step is None:
        return "<td></td>"
    parts = [f"{name} auto = {note}" for name, note in step.resource_notes.items()]
    for engine, section in step.engine_fields.items():  # fields one engine reads, named with their engine
        parts += [_engine_field(engine, name, value) for name, value in section.items()]
    text = "; ".join(parts)
    most = 3 * TEXT_CELL
    shown = text if len(text) <= most else text[: most - 1] + "…"
    return f'<td title="{esc(text)}">{esc(shown)}</td>'


def _engine_field(engine: str, name: str, value: object) -> str:
    """An engine field as the placement cell shows it; a mapping (custom attributes) entry by entry."""
    if isinstance(value, dict):
        return "; ".join(f"{key} = {json.dumps(item, ensure_ascii=False)}" for key, item in value.items())
    return f"{engine} {name} = {_field_text(value)}"


def _field_text(value: object) -> str:
    """An engine field as the placement cell shows it: a list (expressions that must all hold) one by one."""
    return "; ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def _regions_section(report: RunReport) -> str:
    if not report.metrics and not report.promotions and not report.model_trials:
        return ""
    plan = report.plan
    axes = [axis for step in plan.steps.values() for axis in step.axes]
    first_axis = axes[0] if axes else None
    keys: list[str] = []
    for data in report.metrics.values():
        for key, value in data.items():
            scalar = not isinstance(value, dict | list)
            if scalar and key not in keys and key not in axes and len(keys) < METRIC_COLUMNS:
                keys.append(key)
    names = list(report.metrics)
    if first_axis:
        names.sort(key=lambda name: (plan.nodes[name].coords.get(first_axis, ""), name))
    rows = []
    for name in names[:METRIC_ROWS]:
        node = plan.nodes[name]
        group = f"<td>{esc(node.coords.get(first_axis, ''))}</td>" if first_axis else ""
        cells = "".join(value_cell(report.metrics[name].get(key)) for key in keys)
        rows.append(f"<tr>{group}<td>{esc(name)}</td>{cells}</tr>")
    parts = [f'<section id="regions"><h2>Per {esc(first_axis or "node")}: metrics and promotions</h2>']
    if rows:
        header = (f"<th>{esc(first_axis)}</th>" if first_axis else "") + "<th>node</th>"
        header += "".join(f"<th>{esc(key)}</th>" for key in keys)
        parts.append(
            f'<h3>Metrics</h3><table class="sortable"><thead><tr>{header}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table>'
        )
        hidden = max(0, len(names) - METRIC_ROWS) + report.metrics_skipped
        if hidden:
            parts.append(f'<p class="muted">{hidden} more nodes with metrics not shown.</p>')
    parts.append(_models_table(report))
    if report.promotions:
        searched = report.searched
        rows = []
        for record in report.promotions:
            verdict = str(record.get("verdict", ""))
            node = plan.nodes.get(str(record.get("node")))
            choice = searched.choice_of(node.coords) if searched and node else None
            trial = f"<td>{esc(choice.label(searched.search) if choice and searched else '')}</td>" if searched else ""
            rows.append(
                f"<tr><td>{esc(record.get('label', ''))}</td><td class=\"verdict-{esc(verdict)}\">{esc(verdict)}</td>"
                f"<td>{esc(record.get('metric') or '')}</td>"
                f"{value_cell(record.get('new'))}{value_cell(record.get('old'))}"
                f"<td>{esc(record.get('reason') or '')}</td><td>{esc(record.get('pointer') or '')}</td>{trial}</tr>"
            )
        parts.append(
            '<h3>Promotion verdicts</h3><table class="sortable"><thead><tr><th>where</th><th>verdict</th>'
            "<th>metric</th><th>new</th><th>old</th><th>reason</th><th>pointer</th>"
            f"{'<th>search trial</th>' if searched else ''}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    parts.append("</section>")
    return "".join(parts)


def _models_table(report: RunReport) -> str:
    """Each model (train node) of a run whose params a search chose, with the trial they came from."""
    searched = report.searched
    if searched is None or not report.model_trials:
        return ""
    rows = []
    for name, choice in report.model_trials.items():
        node = report.plan.nodes[name]
        where = node.coords.get(searched.axis, "") if searched.axis else ""
        params = ", ".join(f"{key}={json.dumps(value)}" for key, value in choice.params.items())
        rows.append(
            f"<tr><td>{esc(where)}</td><td>{esc(name)}</td><td>{state_badge(report.states.get(name, 'pending'))}</td>"
            f"<td>{esc(choice.label(searched.search))}</td><td>{esc(choice.run_id)}</td><td>{esc(params)}</td></tr>"
        )
    return (
        f"<h3>Models and the search trials they came from</h3><p>params from search <b>{esc(searched.search)}</b>"
        f"{f', per {esc(searched.axis)}' if searched.axis else ''}</p>"
        f'<table class="sortable"><thead><tr><th>{esc(searched.axis or "")}</th><th>model</th><th>state</th>'
        f"<th>search trial</th><th>trial run</th><th>params</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def _has_steps(report: RunReport) -> bool:
    return len(report.plan.nodes) > SMALL_RUN and bool(report.steps)


def _steps_section(report: RunReport) -> str:
    """A big run's nodes summed up per step: counts by state, wall time (first start to last end), slowest
    node (the table `dagflow status` prints)."""
    if not _has_steps(report):
        return ""
    states = list(dict.fromkeys(state for row in report.steps for state in row.counts))
    rows = []
    for row in report.steps:
        counts = "".join(f'<td class="num">{row.counts.get(state) or ""}</td>' for state in states)
        rows.append(
            f'<tr><td>{esc(row.step)}</td><td class="num">{row.nodes}</td>{counts}'
            f'<td class="num" data-v="{row.wall_s or 0}">{duration_text(row.wall_s)}</td>'
            f"<td>{esc(row.slowest or '')}</td>"
            f'<td class="num" data-v="{row.slowest_s or 0}">{duration_text(row.slowest_s)}</td></tr>'
        )
    header = "".join(f"<th>{state_badge(state)}</th>" for state in states)
    opened = " open" if len(rows) <= OPEN_NODE_TABLE else ""
    return (
        f'<section id="steps"><h2>Steps</h2><details{opened}><summary>{plural(len(rows), "step")}: nodes by state, '
        "wall time from the first start to the last end, the slowest node</summary>"
        f'<table class="sortable"><thead><tr><th>step</th><th>nodes</th>{header}<th>wall</th><th>slowest node</th>'
        f"<th>took</th></tr></thead><tbody>{''.join(rows)}</tbody></table></details></section>"
    )


def _nodes_section(report: RunReport) -> str:
    latest = latest_by_node(report.usage)
    rows = []
    for name, node in report.plan.nodes.items():
        record = report.records.get(name)
        state = report.states.get(name, "pending")
        used = latest.get(name)
        started = record.started if record else None
        ended = record.ended if record else None
        took = ended - started if started is not None and ended is not None else None
        coords = " ".join(f"{axis}={value}" for axis, value in node.coords.items())
        where = place_name(used.host, used.slot) if used else ""
        rows.append(
            f"<tr><td>{esc(name)}</td><td>{esc(node.step)}</td><td>{esc(coords)}</td>"
            f"<td data-v=\"{esc(state)}\">{state_badge(state)}</td>"
            f"<td class=\"num\">{record.attempts if record else 0}</td>"
            f"<td class=\"num\">{'' if not record or record.rc is None else record.rc}</td>"
            f"<td class=\"num\" data-v=\"{took if took is not None else ''}\">{duration_text(took)}</td>"
            f"<td class=\"num\" data-v=\"{used.peak_memory_mb if used and used.peak_memory_mb is not None else ''}\">"
            f"{size_text(used.peak_memory_mb) if used and used.peak_memory_mb is not None else '—'}</td>"
            f"<td class=\"num\">{number_text(used.cpu_s, 3) if used else '—'}</td><td>{esc(where)}</td>"
            f"<td>{esc((record.why if record else None) or (used.reason if used else None) or '')}</td></tr>"
        )
    total = len(rows)
    opened = " open" if total <= OPEN_NODE_TABLE else ""
    return (
        f'<section id="nodes"><h2>Nodes</h2><details{opened}><summary>{plural(total, "node")} (click a column to sort)'
        f'</summary><input id="node-filter" type="search" placeholder="filter: words that must all appear"> '
        f'<span class="muted"><span id="node-count">{total}</span> shown</span><div class="scroll">'
        '<table class="sortable" id="node-table"><thead><tr><th>node</th><th>step</th><th>coordinates</th>'
        "<th>state</th><th>attempts</th><th>exit</th><th>took</th><th>peak memory</th><th>CPU s</th><th>where</th>"
        f"<th>why</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div></details></section>"
    )


def _notes(report: RunReport) -> str:
    if not report.notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{esc(note)}</li>" for note in report.notes) + "</ul>"


def render_run(report: RunReport) -> str:
    sections = [
        _notes(report),
        _dag_section(report),
        _steps_section(report),
        _timeline_section(report),
        _resources_section(report),
        _regions_section(report),
        search_section(report.search) if report.search is not None else "",
        _nodes_section(report),
    ]
    return page(f"dagflow run {report.run_id}", _header(report), _nav(report), "".join(sections))
