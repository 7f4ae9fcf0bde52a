"""When each node attempt ran, and where: one lane per machine slot, as inline SVG.

Attempts come from usage.jsonl (start, end, host, slot of every attempt); a node with no usage record
falls back to its journal record (its latest attempt, host unknown). Where an engine names no slot,
the attempts on a host are packed into as few lanes as never overlap (each lane is then a slot in
effect: two attempts in one lane never ran at once); so are overlapping attempts in one named place.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from dagflow.palette import PALETTE
from dagflow.report.dag_layout import step_stem
from dagflow.report.svg import esc
from dagflow.run.journal import NodeRecord
from dagflow.run.usage import NodeUsage
from dagflow.text import plural

LABEL_WIDTH = 190
PLOT_WIDTH = 900
LANE_HEIGHT = 16
AXIS_HEIGHT = 24
MERGE_PX = 2.0  # attempts drawn narrower than this may share one rectangle with their neighbours
# ... where their lane has more attempts than this: a lane of a few has a bar (and a title) per attempt, even of
# attempts of no length (HTCondor's event log times are whole seconds)
MERGE_ABOVE = 100
MAX_LANES = 400  # lanes drawn; a bigger pool's further lanes are summed up in one line
UNKNOWN_HOST = "(host not recorded)"
OTHER_STEPS = "#c4c9cf"  # the steps the palette has no colour left for


@dataclass(frozen=True, slots=True)
class Span:
    node: str
    step: str
    attempt: int
    start: float
    end: float
    host: str
    slot: str | None
    failed: bool


@dataclass(slots=True)
class Lane:
    name: str
    spans: list[Span]


def spans_of(usage: Iterable[NodeUsage], records: dict[str, NodeRecord], steps: dict[str, str]) -> list[Span]:
    now = time.time()
    spans: list[Span] = []
    measured: set[str] = set()
    for record in usage:
        start = record.started
        end = record.ended if record.ended is not None else (start + record.wall_s if start and record.wall_s else None)
        if start is None or end is None:
            continue
        failed = record.exit_code not in (0, None) or record.reason is not None
        spans.append(Span(record.node, record.step, record.attempt, start, max(start, end), record.host or UNKNOWN_HOST,
                          record.slot, failed))  # fmt: skip
        measured.add(record.node)
    for name, node_record in records.items():
        if name in measured or node_record.started is None or name not in steps:
            continue
        end = node_record.ended if node_record.ended is not None else now
        failed = node_record.state == "failed"
        spans.append(Span(name, steps[name], max(1, node_record.attempts), node_record.started,
                          max(node_record.started, end), UNKNOWN_HOST, None, failed))  # fmt: skip
    return spans


def lanes_of(spans: list[Span]) -> list[Lane]:
    """Lanes per host and slot. Attempts that overlap in one place (no slot named, or a "slot" that is a
    queue, as Grid Engine's all.q) are packed into as few lanes as never overlap, numbered #1, #2, ..."""
    places: dict[tuple[str, str], list[Span]] = {}
    for span in spans:
        places.setdefault((span.host, span.slot or ""), []).append(span)
    lanes: list[Lane] = []
    for host, slot in sorted(places, key=lambda place: (place[0] == UNKNOWN_HOST, place[0], place[1] == "", place[1])):
        lanes.extend(_packed(place_name(host, slot or None), places[host, slot]))
    return lanes


def place_name(host: str | None, slot: str | None) -> str:
    """Where an attempt ran, as the timeline's lanes name it: condor's slot1_2@host as it is, else host slot N."""
    if not slot:
        return host or ""
    return slot if not host or host in slot else f"{host} slot {slot}"


def _packed(name: str, spans: list[Span]) -> list[Lane]:
    import heapq

    packed: list[Lane] = []
    free_at: list[tuple[float, int]] = []  # (when the lane is free, lane number)
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if free_at and free_at[0][0] <= span.start:
            _, number = heapq.heappop(free_at)
        else:
            number = len(packed)
            packed.append(Lane(f"{name} #{number + 1}", []))
        packed[number].spans.append(span)
        heapq.heappush(free_at, (span.end, number))
    if len(packed) == 1:
        packed[0].name = name
    return packed


def step_colours(sizes: dict[str, int]) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """Each step's colour and the legend's entries (label, colour). sizes: each step's node count, in DAG
    order. Each step has its own colour where the palette has one for every step; else steps named alike
    (step_stem: mProject_0042 is an mProject*) share one; the biggest get the palette's colours, the rest
    OTHER_STEPS, so the legend never has more than len(PALETTE) + 1 entries."""
    if len(sizes) <= len(PALETTE):
        colours = {step: PALETTE[index] for index, step in enumerate(sizes)}
        return colours, list(colours.items())
    groups: dict[str, list[str]] = {}
    for step in sizes:
        groups.setdefault(step_stem(step), []).append(step)
    if len(groups) > len(PALETTE):
        weight = {stem: sum(sizes[step] for step in steps) for stem, steps in groups.items()}
        kept = set(sorted(groups, key=lambda stem: -weight[stem])[: len(PALETTE) - 1])  # stable: DAG order in ties
        groups = {stem: steps for stem, steps in groups.items() if stem in kept}
    colours: dict[str, str] = {}
    legend: list[tuple[str, str]] = []
    for index, (stem, steps) in enumerate(groups.items()):
        colours.update((step, PALETTE[index]) for step in steps)
        legend.append((steps[0] if len(steps) == 1 else f"{stem}* ({len(steps)} steps)", PALETTE[index]))
    others = len(sizes) - len(colours)
    if others:
        legend.append((plural(others, "other step"), OTHER_STEPS))
    return colours, legend


def _tick_step(total: float) -> float:
    for step in (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400):
        if total / step <= 10:
            return step
    return 86400 * max(1, round(total / 864000))


def _clock(seconds: float) -> str:
    seconds = round(seconds, 1)
    if seconds < 60:
        return f"{seconds:g}s"
    minutes, rest = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s" if rest else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _runs(spans: list[Span], scale: float) -> list[list[Span]]:
    """A lane's attempts (in start order) as drawn: in a lane of more than MERGE_ABOVE, runs of attempts of one
    step, none failed, each under MERGE_PX wide and under a pixel after the one before, make one rectangle: a
    lane of thousands of short attempts is drawn with a few hundred, and a failed attempt keeps its own."""
    if len(spans) <= MERGE_ABOVE:
        return [[span] for span in spans]
    runs: list[list[Span]] = []
    end = 0.0
    for span in spans:
        narrow = not span.failed and (span.end - span.start) * scale < MERGE_PX
        if runs and narrow and runs[-1][-1].step == span.step and (span.start - end) * scale < 1:
            last = runs[-1][-1]
            if not last.failed and (last.end - last.start) * scale < MERGE_PX:
                runs[-1].append(span)
                end = max(end, span.end)
                continue
        runs.append([span])
        end = span.end
    return runs


def timeline_svg(spans: list[Span], colours: dict[str, str], legend: list[tuple[str, str]] | None = None) -> str:
    """legend: its entries (label, colour), by default each step of `colours`; a step it has no colour for is
    drawn in OTHER_STEPS."""
    if not spans:
        return '<p class="muted">No node has started yet.</p>'
    lanes = lanes_of(spans)
    hidden = lanes[MAX_LANES:]
    lanes = lanes[:MAX_LANES]
    origin = min(span.start for span in spans)
    total = max(max(span.end for span in spans) - origin, 1e-3)
    scale = PLOT_WIDTH / total
    height = AXIS_HEIGHT + len(lanes) * LANE_HEIGHT + 4
    width = LABEL_WIDTH + PLOT_WIDTH + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="10.5">'
    ]
    tick = _tick_step(total)
    count = int(total / tick) + 1
    for index in range(count):
        x = LABEL_WIDTH + index * tick * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="{AXIS_HEIGHT - 4}" x2="{x:.1f}" y2="{height}" stroke="#ddd"/>'
            f'<text x="{x:.1f}" y="{AXIS_HEIGHT - 8}" text-anchor="middle" fill="#555">{_clock(index * tick)}</text>'
        )
    for number, lane in enumerate(lanes):
        y = AXIS_HEIGHT + number * LANE_HEIGHT
        parts.append(
            f'<text x="{LABEL_WIDTH - 6}" y="{y + LANE_HEIGHT - 4}" text-anchor="end" fill="#333">'
            f"{esc(_short(lane.name))}<title>{esc(lane.name)}</title></text>"
        )
        for run in _runs(lane.spans, scale):
            span, last = run[0], run[-1]
            x = LABEL_WIDTH + (span.start - origin) * scale
            w = max(0.8, (max(item.end for item in run) - span.start) * scale)
            stroke = ' stroke="#c00" stroke-width="1.5"' if span.failed else ""
            if len(run) == 1:
                title = (
                    f"{span.node} (attempt {span.attempt}) on {lane.name}: {_clock(span.start - origin)} to "
                    f"{_clock(span.end - origin)}, {span.end - span.start:.2f}s{' — failed' if span.failed else ''}"
                )
            else:
                title = (
                    f"{len(run)} attempts of {span.step} on {lane.name}, {_clock(span.start - origin)} to "
                    f"{_clock(last.end - origin)}: {span.node} to {last.node}"
                )
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 2}" width="{w:.1f}" height="{LANE_HEIGHT - 4}" '
                f'fill="{colours.get(span.step, OTHER_STEPS)}"{stroke}><title>{esc(title)}</title></rect>'
            )
    parts.append("</svg>")
    chips = "".join(
        f'<span class="chip"><i style="background:{colour}"></i>{esc(label)}</span>'
        for label, colour in (legend if legend is not None else colours.items())
    )
    more = f'<p class="muted">{len(hidden)} more lanes not drawn.</p>' if hidden else ""
    return f'<div class="legend">{chips}</div><div class="scroll">{"".join(parts)}</div>{more}'


def _short(name: str, most: int = 30) -> str:
    return name if len(name) <= most else "…" + name[-(most - 1) :]
