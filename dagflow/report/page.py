"""The frame every report page shares: the page itself (its Content-Security-Policy, style and one small
script) and the formatting of values in it.

The policy allows no network loads at all and runs only the one script whose hash it names, so even a
value that escaped `esc` could neither load nor run anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import time
from typing import Any

from dagflow.report.svg import colour, esc

TEXT_CELL = 60  # characters of a text value shown in a table cell

SCRIPT = """
(function () {
  "use strict";
  function cellValue(row, index) {
    var cell = row.cells[index];
    var raw = cell ? (cell.getAttribute("data-v") !== null ? cell.getAttribute("data-v") : cell.textContent) : "";
    var number = parseFloat(raw);
    return isNaN(number) || raw.trim() === "" ? raw.toLowerCase() : number;
  }
  document.querySelectorAll("table.sortable th").forEach(function (th) {
    th.addEventListener("click", function () {
      var table = th.closest("table"), body = table.tBodies[0], index = th.cellIndex;
      var descending = th.getAttribute("data-sort") === "asc";
      table.querySelectorAll("th").forEach(function (other) { other.removeAttribute("data-sort"); });
      th.setAttribute("data-sort", descending ? "desc" : "asc");
      var rows = Array.prototype.slice.call(body.rows);
      rows.sort(function (a, b) {
        var x = cellValue(a, index), y = cellValue(b, index);
        var order = x < y ? -1 : x > y ? 1 : 0;
        return descending ? -order : order;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
  var filter = document.getElementById("node-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
      var shown = 0;
      document.querySelectorAll("#node-table tbody tr").forEach(function (row) {
        var text = row.textContent.toLowerCase();
        var keep = words.every(function (word) { return text.indexOf(word) >= 0; });
        row.hidden = !keep;
        if (keep) { shown += 1; }
      });
      document.getElementById("node-count").textContent = shown;
    });
  }
  document.querySelectorAll("input.dag-fit").forEach(function (box) {
    box.addEventListener("change", function () {
      document.getElementById(box.getAttribute("data-for")).classList.toggle("fit", box.checked);
    });
  });
  var boxes = document.querySelectorAll("svg.dag g.box").length;
  var ready = document.getElementById("report-ready");
  if (document.querySelector("svg.dag")) {
    ready.textContent = "DAG boxes drawn: " + boxes;
  } else {
    ready.textContent = "";  // a page without a DAG: nothing to say about one
  }
  ready.setAttribute("data-boxes", String(boxes));
  document.body.setAttribute("data-ready", "1");
})();
"""

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1d2329; background: #fff; }
header { background: #1f2a36; color: #fff; padding: 14px 24px; }
header h1 { margin: 0 0 4px; font-size: 20px; }
header .meta { color: #c9d3dd; font-size: 13px; }
nav { padding: 6px 24px; background: #eef1f4; font-size: 13px; position: sticky; top: 0; z-index: 1; }
nav a { margin-right: 14px; color: #1f5fa8; text-decoration: none; }
main { padding: 8px 24px 40px; }
section { margin: 18px 0 28px; }
h2 { font-size: 17px; border-bottom: 1px solid #dde3e9; padding-bottom: 4px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
.muted { color: #6b7580; }
.legend { margin: 6px 0; }
.chip { display: inline-block; margin: 2px 10px 2px 0; font-size: 12.5px; white-space: nowrap; }
.chip i { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 4px;
  vertical-align: -1px; }
.scroll { overflow: auto; max-height: 640px; border: 1px solid #e3e7eb; border-radius: 4px; }
.fit svg { max-width: 100%; height: auto; }
table { border-collapse: collapse; font-size: 12.5px; margin: 4px 0; }
th, td { border-bottom: 1px solid #e6e9ec; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f4f6f8; position: sticky; top: 0; }
table.sortable th { cursor: pointer; }
table.sortable th[data-sort=asc]::after { content: " ▲"; }
table.sortable th[data-sort=desc]::after { content: " ▼"; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.waste { color: #a4370f; }
.state { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 11.5px; }
.bar { position: relative; height: 10px; width: 160px; background: #e8ecef; border-radius: 2px; }
.bar b { position: absolute; left: 0; top: 0; bottom: 0; background: #4e79a7; border-radius: 2px; }
.bar b.over { background: #d9453d; }
.verdict-promoted { color: #1e7c45; font-weight: 600; }
.verdict-failed { color: #b3261e; font-weight: 600; }
.notes li { color: #6b7580; }
input#node-filter { padding: 4px 8px; width: 320px; margin: 4px 0 8px; }
footer { color: #8a939c; font-size: 12px; padding: 0 24px 24px; }
"""


def utc_time(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_text(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "—"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{seconds:.0f}s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def number_text(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


def value_cell(value: Any) -> str:
    """One metrics value as a table cell: numbers right-aligned and sortable, the rest as short text."""
    if isinstance(value, bool) or value is None:
        return f"<td>{esc(json.dumps(value))}</td>"
    if isinstance(value, int | float):
        return f'<td class="num" data-v="{esc(repr(value))}">{esc(number_text(float(value), 6))}</td>'
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    shown = text if len(text) <= TEXT_CELL else text[: TEXT_CELL - 1] + "…"
    return f'<td title="{esc(text[:2000])}">{esc(shown)}</td>'


def state_badge(state: str) -> str:
    return f'<span class="state" style="background:{colour(state)}">{esc(state.replace("_", "-"))}</span>'


def share_bar(used: float | None, asked: float | None) -> str:
    if used is None or not asked:
        return ""
    share = used / asked
    over = "over" if share > 1 else ""
    return (
        f'<div class="bar" title="{share:.0%} of the request">'
        f'<b class="{over}" style="width:{min(share, 1):.1%}"></b></div>'
    )


def page(title: str, header: str, nav: str, body: str) -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>{header}{nav}<main>{body}"
        '<p class="muted" id="report-ready">(the page script has not run)</p></main>'
        f"<footer>written by dagflow {esc(_version())} at {utc_time(time.time())}</footer>"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def _version() -> str:
    from dagflow import __version__

    return __version__
