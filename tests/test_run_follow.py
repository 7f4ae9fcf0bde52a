"""run/follow.py without a cluster: a batch run's successive statuses, as its engine's status readers would
return them, turned into the local run's reporter calls (plain lines, the live view's counts) and summary."""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console
from test_local_support import make_plan, node, step

from dagflow.run.follow import StateFeed, follow_run
from dagflow.run.journal import JournalState, NodeRecord
from dagflow.run.layout import RunLayout
from dagflow.run.live_view import RichReporter
from dagflow.run.reporting import PlainReporter
from dagflow.run.status import RunStatus

T0 = 1_700_000_000.0


def plan_of(tmp_path: Path):  # type: ignore[no-untyped-def]
    """prep -> (a, b) -> gather; b fails, so gather will not run."""
    steps = [step("prep"), step("work"), step("gather")]
    nodes = [
        node("prep", "prep", "true"),
        node("a", "work", "true", ["prep"]),
        node("b", "work", "false", ["prep"]),
        node("gather", "gather", "true", ["a", "b"]),
    ]
    plan = make_plan(tmp_path, steps, nodes, run_id="r1")
    layout = RunLayout(tmp_path / "runs", "r1")
    layout.create(plan, engine="slurm")
    return plan, layout


def status(plan, layout, alive: bool = True, finished: str | None = None, **records: NodeRecord) -> RunStatus:  # type: ignore[no-untyped-def]
    journal = JournalState(nodes=dict(records), runners=1, started=T0, finished=finished)
    return RunStatus(layout, plan, journal, alive, engine="slurm")


def rec(state: str, attempts: int = 1, started: float | None = None, ended: float | None = None, **kw) -> NodeRecord:  # type: ignore[no-untyped-def]
    return NodeRecord(state=state, attempts=attempts, started=started, ended=ended, **kw)


def events(text: str) -> list[str]:
    """The event lines without their clock."""
    return [re.sub(r"^\d\d:\d\d:\d\d ", "", line) for line in text.splitlines() if re.match(r"^\d\d:\d\d:\d\d ", line)]


def looks(plan, layout) -> list[RunStatus]:  # type: ignore[no-untyped-def]
    return [
        status(plan, layout, prep=rec("queued", 0)),
        status(plan, layout, prep=rec("running", 1, T0 + 1)),
        # a finished between two looks without one seeing it run; b is held, then released and fails
        status(plan, layout, prep=rec("succeeded", 1, T0 + 1, T0 + 2, rc=0), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("held", 0, why="held: over its memory request (HoldReasonCode 34)")),
        status(plan, layout, prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("running", 1, T0 + 6)),
        status(plan, layout, prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("retrying", 1, T0 + 6, T0 + 7, rc=3, why="exit code 3")),
        status(plan, layout, alive=False, finished="failed",
               prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("failed", 2, T0 + 8, T0 + 9, rc=3, why="exit code 3"),
               gather=rec("upstream_failed", 0, why="upstream b failed")),
    ]


def test_each_change_seen_is_one_event_line_in_order_then_the_local_summary(tmp_path: Path) -> None:
    plan, layout = plan_of(tmp_path)
    seen = iter(looks(plan, layout))
    out = io.StringIO()
    result = follow_run(lambda: next(seen), PlainReporter(out, show_starts=True), "Slurm (job 7)", poll_s=0)
    text = out.getvalue()
    assert events(text) == [
        f"starting run r1: 4 nodes on Slurm (job 7) (logs in {layout.run_dir})",
        "[0/4] started prep",
        "[1/4] succeeded prep 1.0s",
        "[1/4] started a",  # never seen running: started, then succeeded, by its own times
        "[2/4] succeeded a 1.0s",
        "[2/4] held b (over its memory request (HoldReasonCode 34))",
        "[2/4] started b",
        "[2/4] retrying b attempt 1 1.0s (exit code 3)",
        "[2/4] started b attempt 2",
        "[3/4] failed b attempt 2 1.0s (exit code 3)",
        "[4/4] 1 node will not run: b failed",
    ]
    summary = text.splitlines()[len(events(text)):]
    assert summary[0].startswith("run r1 failed in ")
    assert summary[0].endswith(": 2 succeeded, 1 failed, 1 upstream-failed")
    assert summary[1] == "  failed b: exit code 3 after 2 attempts; it printed nothing"
    assert summary[2] == "  1 node did not run: a node upstream failed"
    assert summary[3] == "resume with: dagflow run --resume r1"
    assert (result.state, result.exit_code) == ("failed", 1)


def test_a_plain_report_without_starts_is_the_local_runs_lines(tmp_path: Path) -> None:
    plan, layout = plan_of(tmp_path)
    seen = iter(looks(plan, layout))
    out = io.StringIO()
    follow_run(lambda: next(seen), PlainReporter(out), "Slurm", poll_s=0)
    assert [line for line in events(out.getvalue()) if "started" in line] == []
    assert "[3/4] failed b attempt 2 1.0s (exit code 3)" in events(out.getvalue())


def test_a_resume_reports_only_what_this_submission_does(tmp_path: Path) -> None:
    plan, layout = plan_of(tmp_path)
    before = looks(plan, layout)[-1]
    again = [
        status(plan, layout, prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("queued", 2), gather=rec("queued", 0)),
        # b's job runs, and its journal still shows its earlier end until its wrapper journals the new start
        status(plan, layout, prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("failed", 2, T0 + 8, T0 + 9, rc=3, why="exit code 3"), gather=rec("queued", 0)),
        status(plan, layout, alive=False, finished="succeeded",
               prep=rec("succeeded", 1, T0 + 1, T0 + 2), a=rec("succeeded", 1, T0 + 3, T0 + 4),
               b=rec("succeeded", 3, T0 + 20, T0 + 21), gather=rec("succeeded", 1, T0 + 22, T0 + 23)),
    ]
    seen = iter(again)
    out = io.StringIO()
    result = follow_run(lambda: next(seen), PlainReporter(out, show_starts=True), "Slurm", poll_s=0, before=before)
    assert events(out.getvalue()) == [
        f"resuming run r1: 4 nodes on Slurm, 2 already done (logs in {layout.run_dir})",
        "[2/4] started b attempt 3",
        "[3/4] succeeded b attempt 3 1.0s",
        "[3/4] started gather",
        "[4/4] succeeded gather 1.0s",
    ]
    assert "  2 nodes had finished before this resume: not rerun" in out.getvalue()
    assert result.exit_code == 0


def test_the_live_view_counts_stay_whole_through_holds_and_retries(tmp_path: Path) -> None:
    plan, layout = plan_of(tmp_path)
    console = Console(file=io.StringIO(), force_terminal=True, width=100)
    view = RichReporter(console=console)
    feed = StateFeed(view, plan)
    from dagflow.run.reporting import RunInfo

    view.run_started(RunInfo(plan, "r1", layout.run_dir, None, False, set(), "Grid Engine"))
    for look in looks(plan, layout):
        feed.observe(look)
        assert all(count >= 0 for count in view.counts.values()), view.counts
        assert sum(view.counts.values()) == len(plan.nodes), view.counts
    assert {state: count for state, count in view.counts.items() if count} == {
        "succeeded": 2, "failed": 1, "upstream_failed": 1,
    }  # fmt: skip
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "on Grid Engine" in text and "held b: over its memory request" in text


# What an execute side can put in a hold reason or a failure's why: a title change, a colour, a screen clear.
HOSTILE = "\x1b]0;pwned\x07\x1b[31mred\x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[2J"


def test_a_hold_reason_and_a_why_are_printed_inert_by_both_views(tmp_path: Path) -> None:  # #40 item 18
    plan, layout = plan_of(tmp_path)
    hostile = [
        status(plan, layout, prep=rec("held", 0, why=f"held: {HOSTILE} (HoldReasonCode 1)")),
        status(plan, layout, alive=False, finished="failed", prep=rec("failed", 1, T0 + 1, T0 + 2, rc=1, why=HOSTILE),
               a=rec("upstream_failed", 0), b=rec("upstream_failed", 0), gather=rec("upstream_failed", 0)),
    ]  # fmt: skip
    out = io.StringIO()
    seen = iter(hostile)
    follow_run(lambda: next(seen), PlainReporter(out), "HTCondor", poll_s=0)
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue(), out.getvalue()
    assert f"[0/4] held prep ({SHOWN} (HoldReasonCode 1))" in events(out.getvalue())
    assert f"  failed prep: {SHOWN}; it printed nothing" in out.getvalue().splitlines()
    console = Console(file=io.StringIO(), force_terminal=True, width=300)
    seen = iter(hostile)
    follow_run(lambda: next(seen), RichReporter(console=console), "HTCondor", poll_s=0)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "\x1b]0;" not in text and "\x07" not in text and "\x1b[2J" not in text, repr(text)
    assert "pwned" in text and "\\x1b]0;" in text
