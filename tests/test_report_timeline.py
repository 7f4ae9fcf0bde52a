"""The timeline's lanes: one per named slot, and attempts that overlap in one place (no slot, or a queue
named as the slot) packed into lanes in which no two attempts ever overlap."""

from __future__ import annotations

from itertools import pairwise

from dagflow.report.timeline import UNKNOWN_HOST, Span, lanes_of, place_name, timeline_svg


def span(node: str, start: float, end: float, host: str = "h1", slot: str | None = None) -> Span:
    return Span(node, node.split(".")[0], 1, start, end, host, slot, failed=False)


def test_lanes_never_hold_overlapping_attempts() -> None:
    spans = [
        span("a.1", 0, 10, slot="slot1_1@h1"),
        span("a.2", 2, 5, slot="slot1_2@h1"),
        span("b.1", 0, 4, host="h2", slot="all.q"),  # a queue, not a slot: these overlap
        span("b.2", 1, 3, host="h2", slot="all.q"),
        span("b.3", 4, 6, host="h2", slot="all.q"),
        span("c.1", 0, 1, host="h2"),
        span("d.1", 5, 9, host=UNKNOWN_HOST),
    ]
    lanes = lanes_of(spans)
    names = [lane.name for lane in lanes]
    assert names == ["slot1_1@h1", "slot1_2@h1", "h2 slot all.q #1", "h2 slot all.q #2", "h2", UNKNOWN_HOST]
    for lane in lanes:
        ordered = sorted(lane.spans, key=lambda s: s.start)
        assert all(first.end <= second.start for first, second in pairwise(ordered))
    assert sorted(s.node for lane in lanes for s in lane.spans) == sorted(s.node for s in spans)


def test_place_names_and_svg() -> None:
    assert place_name("vm", "1") == "vm slot 1"
    assert place_name("vm", "slot1_2@vm") == "slot1_2@vm"
    assert place_name("vm", None) == "vm"
    svg = timeline_svg([span("a.1", 0, 1, slot="<b>"), span("a.2", 0.5, 2)], {"a": "#4e79a7"})
    assert svg.count("<rect ") == 2 and "h1 slot &lt;b&gt;" in svg and "<b>" not in svg


def test_attempts_of_no_length_in_a_small_lane_each_have_their_bar() -> None:
    """HTCondor's event log times are whole seconds: in the condor report test under load, check.us and check.br
    ran one after the other on one slot, each starting and ending in the same second. Their zero-width bars were
    merged into one ("2 attempts of check ..."), so check.us had no bar of its own; in a lane of a few attempts
    nothing needs merging."""
    spans = [span("check.us", 100.0, 100.0, "vm", "slot1_1"), span("check.br", 100.0, 100.0, "vm", "slot1_1"),
             span("train.us", 90.0, 100.0, "vm", "slot1_2")]  # fmt: skip
    svg = timeline_svg(spans, {"check": "#111", "train": "#222"})
    assert "check.us (attempt 1)" in svg and "check.br (attempt 1)" in svg
    assert "attempts of" not in svg
    many = [span(f"check.n{i}", 100.0 + i * 1e-4, 100.0 + i * 1e-4, "vm", "slot1_1") for i in range(500)]
    drawn = timeline_svg([*many, spans[2]], {"check": "#111", "train": "#222"})
    assert drawn.count("<rect") < 50 and "attempts of check" in drawn  # a big lane's short attempts still merge
