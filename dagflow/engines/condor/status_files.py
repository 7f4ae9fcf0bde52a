"""DAGMan's node status file (NODE_STATUS_FILE): a snapshot of every node, rewritten as the DAG runs.

The file is a sequence of new-ClassAd-format ads: one `Type = "DagStatus"` ad for the whole DAG, one
`Type = "NodeStatus"` ad per node, and a `Type = "StatusEnd"` ad with the time the file was finished
and of the next update. NodeStatus (and DagStatus) values, from the HTCondor manual:

    0 not ready   1 ready   2 pre script running   3 job(s) in the queue   4 post script running
    5 done        6 error   7 futile (an ancestor failed; the node will never run)

A 100k-node file is about 20 MB. `classad2.parseAds` reads it correctly but slowly, so the NodeStatus
ads are read with one regular expression in the attribute order DAGMan writes them; when the count of
matches is not the count of NodeStatus ads (a DAGMan that writes them differently) the whole file is
read again with classad2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import classad2

NOT_READY, READY, PRERUN, SUBMITTED, POSTRUN, DONE, ERROR, FUTILE = range(8)
STATUS_NAMES = ("not ready", "ready", "pre script", "submitted", "post script", "done", "error", "futile")

_STRING = rb'"([^"\\]*(?:\\.[^"\\]*)*)"'
# A NodeStatus ad as (node name, the text of its other attributes); most nodes share that text (done,
# no details, no retries), so each distinct text is parsed once by _NODE_FIELDS.
_NODE_AD = re.compile(
    rb'Type = "NodeStatus";\s*Node = '
    + _STRING
    + rb";\s*(NodeStatus = \d+;\s*StatusDetails = "
    + rb'"[^"\\]*(?:\\.[^"\\]*)*"'
    + rb";\s*RetryCount = \d+;\s*JobProcsQueued = \d+;\s*JobProcsHeld = \d+;)"
)
_NODE_FIELDS = re.compile(
    rb"NodeStatus = (\d+);\s*StatusDetails = "
    + _STRING
    + rb";\s*RetryCount = (\d+);\s*JobProcsQueued = (\d+);\s*JobProcsHeld = (\d+);"
)
_NODE_AD_MARK = b'Type = "NodeStatus"'
_AD = re.compile(rb"\[[^\[\]]*\]")


class NodeStatusAd(NamedTuple):
    status: int
    details: str  # e.g. "idle", "held", "Job proc (1234.0.0) failed with status 1"
    retry_count: int  # retries DAGMan has used
    procs_queued: int
    procs_held: int


@dataclass(slots=True)
class NodeStatusFile:
    dag: dict[str, object] = field(default_factory=dict)  # the DagStatus ad's attributes
    nodes: dict[str, NodeStatusAd] = field(default_factory=dict)
    timestamp: float | None = None  # when DAGMan wrote it (the DagStatus ad's Timestamp)
    complete: bool = False  # the StatusEnd ad is there (the file was not cut short)

    @property
    def dag_status(self) -> int | None:
        value = self.dag.get("DagStatus")
        return value if isinstance(value, int) else None


def _unquote(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "\\" in text:
        text = str(classad2.ExprTree('"' + text + '"').eval())
    return text


def _plain(ad: classad2.ClassAd) -> dict[str, object]:
    plain: dict[str, object] = {}
    for key in ad.keys():  # noqa: SIM118 (ClassAd iteration order is the file's)
        value = ad.get(key)
        plain[key] = value if isinstance(value, str | int | float | bool) else str(value)
    return plain


class _SharedAds(dict[bytes, NodeStatusAd]):
    """One NodeStatusAd per distinct attribute text (they are immutable, so nodes can share them)."""

    def __missing__(self, fields: bytes) -> NodeStatusAd:
        match = _NODE_FIELDS.match(fields)
        assert match is not None  # _NODE_AD only captures text that _NODE_FIELDS matches
        status, details, retry, queued, held = match.groups()
        ad = self[fields] = NodeStatusAd(int(status), _unquote(details), int(retry), int(queued), int(held))
        return ad


def parse_node_status(data: bytes) -> NodeStatusFile:
    result = NodeStatusFile()
    first = _AD.search(data)
    if first and b'"DagStatus"' in first.group():
        result.dag = _plain(classad2.parseOne(first.group().decode("utf-8", "replace")))
        stamp = result.dag.get("Timestamp")
        result.timestamp = float(stamp) if isinstance(stamp, int | float) else None
    result.complete = b'Type = "StatusEnd"' in data[-400:]
    matches = _NODE_AD.findall(data)
    if len(matches) == data.count(_NODE_AD_MARK):
        ads = _SharedAds()
        if b"\\" in data:
            result.nodes = {_unquote(name): ads[fields] for name, fields in matches}
        else:  # no escapes anywhere: every name is its bytes, decoded
            result.nodes = {name.decode("utf-8", "replace"): ads[fields] for name, fields in matches}
        return result
    for ad in classad2.parseAds(data.decode("utf-8", "replace")):
        if ad.get("Type") == "NodeStatus":
            result.nodes[str(ad["Node"])] = _node_from_ad(ad)
    return result


def _node_from_ad(ad: classad2.ClassAd) -> NodeStatusAd:
    def number(key: str) -> int:
        value = ad.get(key, 0)
        return value if isinstance(value, int) else 0

    return NodeStatusAd(
        number("NodeStatus"),
        str(ad.get("StatusDetails", "")),
        number("RetryCount"),
        number("JobProcsQueued"),
        number("JobProcsHeld"),
    )


def parse_node_status_with_classad(data: bytes) -> dict[str, NodeStatusAd]:
    """Every NodeStatus ad read by classad2 alone: the reference the fast path is checked against."""
    return {
        str(ad["Node"]): _node_from_ad(ad)
        for ad in classad2.parseAds(data.decode("utf-8", "replace"))
        if ad.get("Type") == "NodeStatus"
    }


def read_node_status(path: Path) -> NodeStatusFile | None:
    """The node status file, or None before DAGMan has written it."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    return parse_node_status(data)
