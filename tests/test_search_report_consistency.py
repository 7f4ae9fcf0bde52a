"""A search's HTML report and `dagflow search status`'s PNG tell the same story: each region has one colour
in both, a trial stopped early shows its reason as a reason (not as an error), and a page without a DAG
says nothing about DAG boxes. A real per-region search, its pages opened in headless Chromium."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_report_support import Loaded, console_errors, open_page
from test_search_scheduler_support import write_pipeline

from dagflow.search.store import SearchStore

pytestmark = pytest.mark.slow  # its module fixture alone takes seconds: not for the fast subset

REGIONS = ["b", "a"]  # listed out of name order: the PNG once coloured in this order, the HTML in sorted order
STOP_REASON = "median rule at step 3: best so far 12.5 is worse than the median 10.4"


@dataclass(frozen=True, slots=True)
class Search:
    directory: Path
    page: Loaded  # the whole search's page (`report --search`), after its script ran
    png: Path  # `search status`'s convergence plot


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )  # the timeout only keeps a regression from hanging the suite
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done


def record_a_stopped_trial(db: Path) -> None:
    """What the scheduler's early stopping writes for a trial it stops: the decision, then the stop."""
    store = SearchStore(db)
    try:
        trial = store.add_trial("quad", "a", {"x": 0.9, "k": 3, "mode": "b"}, "local", 60)
        trial = store.mark_submitted(trial, "4242")
        assert store.mark_stopping(trial, 12.5, 12.5, 3, STOP_REASON)
        assert store.finish_stopping(store.trial("quad", "a", trial.number))
    finally:
        store.close()


@pytest.fixture(scope="module")
def search(tmp_path_factory: pytest.TempPathFactory) -> Search:
    directory = tmp_path_factory.mktemp("search")
    write_pipeline(directory, budget=2, parallel=2, regions=REGIONS, optimizer="random")
    (directory / "fail-once").write_text("")  # one trial fails with an error of its own
    cli("search", "run", "pipeline.yaml", "--poll", "0.05", "--seed", "3", cwd=directory)
    record_a_stopped_trial(directory / ".dagflow" / "search.db")
    png = directory / "convergence.png"
    cli("search", "status", "quad", "--plot", str(png), cwd=directory)
    page = directory / "search.html"
    cli("report", "--search", "quad", "--out", str(page), cwd=directory)
    loaded = open_page(page, directory / "search-page.png")
    assert console_errors(loaded.console) == []
    return Search(directory, loaded, png)


def legend_colours(svg: str) -> dict[str, str]:
    """region -> colour, from the HTML chart's legend (a swatch, then `REGION best so far`)."""
    swatch = r'<rect [^>]*fill="(#[0-9a-f]{6})"[^>]*/?>(?:</rect>)?'
    pairs = re.findall(swatch + r"<text [^>]*>([^<]*) best so far</text>", svg)
    return {label: colour for colour, label in pairs}


def rows_of_y(png: Path, colour: str) -> list[int]:
    """The pixel rows where the PNG shows exactly this colour (the cores of its lines)."""
    import matplotlib.image
    import numpy as np

    pixels = (matplotlib.image.imread(png)[:, :, :3] * 255).round().astype(int)
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return list(np.nonzero(np.all(pixels == rgb, axis=2))[0])


@pytest.mark.slow
def test_each_region_has_the_same_colour_in_the_html_chart_and_the_png(search: Search) -> None:
    colours = legend_colours(search.page.dom)
    assert set(colours) == set(REGIONS), colours
    assert colours["a"] != colours["b"]
    # Region b's objective is 10 higher, so its line is the upper one in the PNG (smaller pixel rows).
    rows = {region: rows_of_y(search.png, colour) for region, colour in colours.items()}
    assert len(rows["a"]) > 20 and len(rows["b"]) > 20, {r: len(found) for r, found in rows.items()}
    median = {region: sorted(found)[len(found) // 2] for region, found in rows.items()}
    assert median["b"] < median["a"], median


class TrialsTable(HTMLParser):
    """The header and the cells' text of the page's trials table (the last table on a search page)."""

    def __init__(self) -> None:
        super().__init__()
        self.header: list[str] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.header, self.rows = [], []
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "tr" and not self._in_head:
            self.rows.append([])
        elif tag in ("th", "td"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            text = "".join(self._cell).strip()
            (self.header if self._in_head else self.rows[-1]).append(text)
            self._cell = None


def trial_rows(dom: str) -> list[dict[str, str]]:
    table = TrialsTable()
    table.feed(dom)
    return [dict(zip(table.header, row, strict=True)) for row in table.rows]


def test_a_stopped_trials_reason_is_shown_as_why_it_stopped_not_as_an_error(search: Search) -> None:
    rows = trial_rows(search.page.dom)
    stopped = [row for row in rows if row["state"] == "stopped"]
    failed = [row for row in rows if row["state"] == "failed"]
    assert len(stopped) == 1 and len(failed) == 1, rows
    assert stopped[0]["error"] == "", stopped[0]
    assert stopped[0]["stopped because"] == STOP_REASON, stopped[0]
    assert "failing on purpose" in failed[0]["error"] and failed[0]["stopped because"] == "", failed[0]


def ready_line(dom: str) -> str:
    found = re.search(r'<p [^>]*id="report-ready"[^>]*>([^<]*)</p>', dom)
    assert found is not None, dom[-2000:]
    return found.group(1)


def test_a_page_without_a_dag_says_nothing_about_dag_boxes(search: Search) -> None:
    dom = search.page.dom
    assert 'data-ready="1"' in dom and "<svg" in dom and 'class="dag"' not in dom
    assert "DAG" not in ready_line(dom), ready_line(dom)


@pytest.mark.slow
def test_a_run_page_still_counts_its_dag_boxes(search: Search, tmp_path: Path) -> None:
    page = tmp_path / "trial.html"
    cli("report", "quad-t1-a", "--out", str(page), cwd=search.directory)
    loaded = open_page(page, tmp_path / "trial.png")
    boxes = len(re.findall(r'<g class="box"', loaded.dom))
    assert boxes > 0 and ready_line(loaded.dom) == f"DAG boxes drawn: {boxes}", ready_line(loaded.dom)
