"""DAGMan's node status file (NODE_STATUS_FILE): a snapshot of every node, rewritten as the DAG runs.

The file is a sequence of new-ClassAd-format ads: one `Type = "DagStatus"` ad for the whole DAG, one
`Type = "NodeStatus"` ad per node, and a `Type = "StatusEnd"` ad with the time the file was finished
and of the next update. NodeStatus (and DagStatus) values, from the HTCondor manual:

    0 not ready   1 ready   2 pre script running   3 job(s) in the queue   4 post script running
    5 done        6 error   7 futile (an ancestor failed; the node will never run)

DAGMan (25.x) writes each ad as a `[` line, one attribute per line, some followed by a comment, and a
`]` line (tests/data/condor-pool/region-retrain.status is one written by a real pool):

    [
      Type = "NodeStatus";
      Node = "stage.us";
      NodeStatus = 6; /* "STATUS_ERROR" */
      StatusDetails = "Job proc (12.0.0) failed with status 127 (after 2 node retries)";
      RetryCount = 2;
      JobProcsQueued = 0;
      JobProcsHeld = 0;
    ]

A 100k-node file is about 20 MB. `classad2.parseAds` reads it correctly but slowly (about 16 s), so
the fast path finds every ad with a Node line in that line layout with one regular expression, as
(the lines before the Node line, the node's name, the lines after it). Most nodes share those other
lines (done, no details, no retries), so each distinct text is read once, attribute by attribute, in
any order; a text it cannot read (an expression, a list, two attributes on one line) is read by
classad2, that ad alone. When the ads found are not all the file's NodeStatus ads (ads on one line,
say), the whole file is read by classad2.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import classad2

NOT_READY, READY, PRERUN, SUBMITTED, POSTRUN, DONE, ERROR, FUTILE = range(8)
STATUS_NAMES = ("not ready", "ready", "pre script", "submitted", "post script", "done", "error", "futile")

_QUOTED = rb'"[^"\\\n]*(?:\\.[^"\\\n]*)*"'
_COMMENT = rb"(?:/\*(?:[^*\n]|\*(?!/))*\*/[ \t]*)?"
_AD_LINE = rb"(?:[^\]\n][^\n]*)?\n"  # any line of an ad but its closing `]`
# A `[ ... ]` ad with a Node line: (lines before it, the name between its quotes, lines after it).
_NODE_AD = re.compile(
    rb"^\[[ \t]*\n((?:"
    + _AD_LINE
    + rb')*?)[ \t]*Node[ \t]*=[ \t]*"([^"\\\n]*(?:\\.[^"\\\n]*)*)"[ \t]*;[ \t]*'
    + _COMMENT
    + rb"\n((?:"
    + _AD_LINE
    + rb")*?)\][ \t]*$",
    re.MULTILINE,
)
# One attribute line: `Name = 12;` or `Name = "text";`, then maybe a comment.
_ATTR_LINE = re.compile(rb"[ \t]*(\w+)[ \t]*=[ \t]*(-?\d+|" + _QUOTED + rb")[ \t]*;[ \t]*" + _COMMENT + rb"\n")
_BLANK_LINE = re.compile(rb"[ \t]*\n")
_NODE_AD_MARK = b'"NodeStatus"'
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


def _read_attributes(text: bytes) -> dict[str, int | str] | None:
    """`Name = value;` lines (attribute names lower-cased, as ClassAds ignore their case); None when a
    line is anything else."""
    attributes: dict[str, int | str] = {}
    position, end = 0, len(text)
    while position < end:
        line = _ATTR_LINE.match(text, position)
        if line is None:
            blank = _BLANK_LINE.match(text, position)
            if blank is None:
                return None
            position = blank.end()
            continue
        name, value = line.groups()
        attributes[name.decode().lower()] = _unquote(value[1:-1]) if value[:1] == b'"' else int(value)
        position = line.end()
    return attributes


def _node_from_attributes(attributes: dict[str, int | str]) -> NodeStatusAd:
    def number(key: str) -> int:
        value = attributes.get(key, 0)
        return value if isinstance(value, int) else 0

    return NodeStatusAd(
        number("nodestatus"),
        str(attributes.get("statusdetails", "")),
        number("retrycount"),
        number("jobprocsqueued"),
        number("jobprocsheld"),
    )


class _SharedAds(dict[tuple[bytes, bytes], NodeStatusAd | None]):
    """The NodeStatusAd of each distinct (lines before, lines after) a Node line, None for an ad that is
    not a NodeStatus ad. NodeStatusAds are immutable, so nodes share them."""

    def __missing__(self, key: tuple[bytes, bytes]) -> NodeStatusAd | None:
        before, after = key
        attributes = _read_attributes(before + after)
        if attributes is None:  # read it as a ClassAd (its Node is no part of what is read)
            text = b"[\n" + before + b'Node = "";\n' + after + b"]"
            ad = classad2.parseOne(text.decode("utf-8", "replace"))
            node = _node_from_ad(ad) if ad.get("Type") == "NodeStatus" else None
        else:
            node = _node_from_attributes(attributes) if attributes.get("type") == "NodeStatus" else None
        self[key] = node
        return node


def parse_node_status(data: bytes) -> NodeStatusFile:
    result = NodeStatusFile()
    first = _AD.search(data)
    if first and b'"DagStatus"' in first.group():
        result.dag = _plain(classad2.parseOne(first.group().decode("utf-8", "replace")))
        stamp = result.dag.get("Timestamp")
        result.timestamp = float(stamp) if isinstance(stamp, int | float) else None
    result.complete = b'Type = "StatusEnd"' in data[-400:]
    nodes = _read_node_ads(data)
    if nodes is None:
        nodes = parse_node_status_with_classad(data)
    result.nodes = nodes
    return result


def _read_node_ads(data: bytes) -> dict[str, NodeStatusAd] | None:
    """The fast path (see the module docstring); None when it did not find every NodeStatus ad."""
    ads = _SharedAds()
    shared = ads.__getitem__
    decode = _unquote if b"\\" in data else lambda name: name.decode("utf-8", "replace")
    nodes = {decode(name): shared((before, after)) for before, name, after in _NODE_AD.findall(data)}
    found = sum(1 for ad in nodes.values() if ad is not None)
    if found != data.count(_NODE_AD_MARK):
        return None
    if found != len(nodes):  # ads with a Node that are not NodeStatus ads
        return {name: ad for name, ad in nodes.items() if ad is not None}
    return nodes  # type: ignore[return-value]


def _node_from_ad(ad: classad2.ClassAd) -> NodeStatusAd:
    def value(key: str, default: object) -> object:
        found = ad.get(key, default)
        return ad.eval(key) if isinstance(found, classad2.ExprTree) else found  # e.g. `1 + 1`

    def number(key: str) -> int:
        found = value(key, 0)
        return found if isinstance(found, int) else 0

    return NodeStatusAd(
        number("NodeStatus"),
        str(value("StatusDetails", "")),
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
