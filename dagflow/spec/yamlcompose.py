"""Compose YAML events into nodes with limits, so hostile files fail fast with a located error.

PyYAML's own composer recurses once per nesting level (a RecursionError near 500 levels, a C-stack
overflow, i.e. a segfault, near 100,000 with libyaml) and lets aliases expand without bound (a
400-byte "billion laughs" file takes minutes and gigabytes). This composer reads the event stream
with an explicit stack and keeps, for every node, its size and height *with aliases expanded*; it
stops at the first alias (a merge key's too) that takes what aliases add past MAX_NODES values, or at the
first event past MAX_DEPTH levels, before anything is expanded. The values a file writes out count for
nothing here: reading them costs what reading the file costs, so a pipeline of thousands of steps loads.
Recursive aliases (`&a [*a]`, `&a {<<: *a}`) are refused where they occur.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NoReturn

import yaml
from yaml.resolver import Resolver

from dagflow.errors import Diagnostic, SpecError

# Far above what any real pipeline's aliases add (a few hundred values), nesting (a dozen levels), far
# below what hurts: 100,000 values build in well under a second.
MAX_NODES = 100_000  # values that aliases and merge keys add, over those written out
MAX_DEPTH = 100
DEPTH_LIMIT_MESSAGE = f"nested deeper than {MAX_DEPTH} levels (the limit per pipeline file)"


@dataclass
class _Open:
    """A collection whose end event has not come yet."""

    node: yaml.SequenceNode | yaml.MappingNode
    anchor: str | None
    size: int = 1  # values inside it (itself included), aliases expanded
    height: int = 1  # collection levels inside it (itself included), aliases expanded
    key: yaml.Node | None = None  # a mapping's key still waiting for its value


@dataclass(frozen=True)
class _Done:
    node: yaml.Node
    size: int
    height: int  # 0 for a scalar


@dataclass
class _Composer:
    filename: str
    resolver: Resolver = field(default_factory=Resolver)
    stack: list[_Open] = field(default_factory=list)
    anchors: dict[str, _Done] = field(default_factory=dict)
    added: int = 0  # values that aliases have added so far
    documents: int = 0
    root: yaml.Node | None = None

    def compose(self, events: Iterable[yaml.Event]) -> yaml.Node | None:
        for event in events:
            if isinstance(event, yaml.DocumentStartEvent):
                self._document(event)
            elif isinstance(event, yaml.ScalarEvent):
                self._scalar(event)
            elif isinstance(event, yaml.AliasEvent):
                self._alias(event)
            elif isinstance(event, yaml.SequenceStartEvent | yaml.MappingStartEvent):
                self._start(event)
            elif isinstance(event, yaml.SequenceEndEvent | yaml.MappingEndEvent):
                self._end(event)
        return self.root

    def _document(self, event: yaml.DocumentStartEvent) -> None:
        self.documents += 1
        if self.documents > 1:
            self._fail(event, "expected a single document in the file, but found another document ('---')")

    def _scalar(self, event: yaml.ScalarEvent) -> None:
        tag = event.tag if event.tag not in (None, "!") else self.resolver.resolve(
            yaml.ScalarNode, event.value, event.implicit
        )
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, style=event.style)
        self._define(event.anchor, event, _Done(node, 1, 0))
        self._attach(_Done(node, 1, 0))

    def _alias(self, event: yaml.AliasEvent) -> None:
        name = event.anchor
        if any(frame.anchor == name for frame in self.stack):
            self._fail(event, f"alias *{name} refers to the collection it is inside (a recursive alias): "
                       "it would expand forever")
        if name not in self.anchors:
            self._fail(event, f"alias *{name} is not defined above (define it with &{name} before using it)")
        target = self.anchors[name]
        if len(self.stack) + target.height > MAX_DEPTH:
            self._fail(event, f"nested deeper than {MAX_DEPTH} levels once alias *{name} is expanded "
                       "(the limit per pipeline file)")
        self.added += target.size
        if self.added > MAX_NODES:
            self._fail(event, f"expanding alias *{name} here makes aliases and merge keys add more than "
                       f"{MAX_NODES:,} values (the limit per pipeline file; every use of an alias or merge key "
                       "adds its whole value again)")
        self._attach(target)

    def _start(self, event: yaml.SequenceStartEvent | yaml.MappingStartEvent) -> None:
        if len(self.stack) >= MAX_DEPTH:
            self._fail(event, DEPTH_LIMIT_MESSAGE)
        kind = yaml.SequenceNode if isinstance(event, yaml.SequenceStartEvent) else yaml.MappingNode
        tag = event.tag if event.tag not in (None, "!") else self.resolver.resolve(kind, None, event.implicit)
        node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)
        self.stack.append(_Open(node, event.anchor))

    def _end(self, event: yaml.SequenceEndEvent | yaml.MappingEndEvent) -> None:
        frame = self.stack.pop()
        frame.node.end_mark = event.end_mark
        done = _Done(frame.node, frame.size, frame.height)
        self._define(frame.anchor, event, done)
        self._attach(done)

    def _define(self, anchor: str | None, event: yaml.Event, done: _Done) -> None:
        if anchor is None:
            return
        if anchor in self.anchors:
            line = self.anchors[anchor].node.start_mark.line + 1
            self._fail(event, f"anchor &{anchor} is defined twice (first on line {line})")
        self.anchors[anchor] = done

    def _attach(self, child: _Done) -> None:
        if not self.stack:
            self.root = child.node
            return
        frame = self.stack[-1]
        frame.size += child.size
        frame.height = max(frame.height, child.height + 1)
        if isinstance(frame.node, yaml.SequenceNode):
            frame.node.value.append(child.node)
        elif frame.key is None:
            frame.key = child.node
        else:
            frame.node.value.append((frame.key, child.node))
            frame.key = None

    def _fail(self, event: yaml.Event, message: str) -> NoReturn:
        mark = event.start_mark
        raise SpecError([Diagnostic(self.filename, mark.line + 1, mark.column + 1, self._path(), message)])

    def _path(self) -> str:
        """The dotted field path of the position being composed, for the error message."""
        text = ""
        for frame in self.stack:
            if isinstance(frame.node, yaml.SequenceNode):
                text += f"[{len(frame.node.value)}]"
            elif isinstance(frame.key, yaml.ScalarNode):
                text += f".{frame.key.value}" if text else str(frame.key.value)
            else:
                break
        return text


def compose(events: Iterable[yaml.Event], filename: str) -> yaml.Node | None:
    """The document's root node (None for an empty file); SpecError when a limit is exceeded."""
    return _Composer(filename).compose(events)
