"""Load YAML into plain Python data while remembering where every key and value came from.

Nodes with marks come from our own composer (yamlcompose: limits on size and depth, for hostile
files); we build the data ourselves from those nodes so each value's path (e.g.
("steps", "train", "resources", "memory")) maps to its line and column.
libyaml's CSafeLoader is used when available: it is several times faster on large files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import ConstructorError, SafeConstructor

from dagflow.errors import Diagnostic, SpecError
from dagflow.spec.yamlcompose import DEPTH_LIMIT_MESSAGE, MAX_DEPTH, MAX_NODES, compose

Path_ = tuple[str | int, ...]
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"
# libyaml's scanner refuses flow collections nested about 1,000 deep (PyYAML 6.0.4 on), reading ahead of
# the events compose() counts: the same refusal as ours, which names the limit.
_LIBYAML_DEPTH_LIMIT = "exceeded maximum nesting depth"
# Python's default limit on int <-> str conversion (sys.int_info.default_max_str_digits): a longer integer
# cannot be read from decimal text, and one read from hex, octal or base 60 could never be printed.
MAX_INT_DIGITS = 4300
_INT_LIMIT = 10**MAX_INT_DIGITS
INT_LIMIT_MESSAGE = f"an integer longer than {MAX_INT_DIGITS:,} digits (the limit per pipeline file)"
# A plain value cannot hold `{` inside a flow collection (`[ckpt/{region}]`): the brace opens a mapping and
# the parser's complaint ("did not find expected ',' or ']'") says nothing of templates.
FLOW_BRACE_HINT = "a `{` inside `[...]` or `{...}` starts a mapping: quote the value or use a block list"
LEADING_BRACE_HINT = 'a value that starts with `{` is a mapping: quote it (to: "{region}/data")'
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # YAML 1.1's line breaks, as its marks count lines
__all__ = ["MAX_DEPTH", "MAX_NODES", "Path_", "Positions", "dotted", "load_yaml"]


@dataclass
class Positions:
    """1-based (line, column) of each value and each mapping key, by path."""

    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: Path_, *, key: bool = False) -> tuple[int, int]:
        """Position of path's value (its key when key=True), else of its deepest known ancestor."""
        if key and path in self.keys:
            return self.keys[path]
        for end in range(len(path), -1, -1):
            if path[:end] in self.values:
                return self.values[path[:end]]
        return (1, 1)


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Builder:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.positions = Positions()
        self.diagnostics: list[Diagnostic] = []
        self._scalars = SafeConstructor()

    def error(self, node: yaml.Node, path: Path_, message: str) -> None:
        line, column = _mark(node)
        self.diagnostics.append(Diagnostic(self.filename, line, column, dotted(path), message))

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.positions.values[path] = _mark(node)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, index)) for index, item in enumerate(node.value)]
        try:
            value = self._scalars.construct_object(node)
        except ConstructorError as exc:
            self.error(node, path, f"cannot read this value: {exc.problem}")
            return None
        except ValueError:  # int() refusing text of more digits than it converts: the only ValueError here
            self.error(node, path, INT_LIMIT_MESSAGE)
            return None
        if isinstance(value, int) and abs(value) >= _INT_LIMIT:  # from hex, octal or base 60: never printable
            self.error(node, path, INT_LIMIT_MESSAGE)
            return None
        return value

    def _mapping(self, node: yaml.MappingNode, path: Path_) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, yaml.Node] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged = self.build(value_node, path)
                for item in merged if isinstance(merged, list) else [merged]:
                    if isinstance(item, dict):
                        for key, value in item.items():
                            result.setdefault(key, value)
                continue
            key = self.build(key_node, (*path, "<key>"))
            if not isinstance(key, str):
                if isinstance(key, bool | int | float):
                    key = str(key).lower() if isinstance(key, bool) else str(key)
                else:
                    self.error(key_node, path, "mapping keys must be plain strings")
                    continue
            if key in seen:
                first_line, _ = _mark(seen[key])
                self.error(
                    key_node,
                    (*path, key),
                    f"duplicate key {key!r} (first defined on line {first_line})",
                )
                continue
            seen[key] = key_node
            self.positions.keys[(*path, key)] = _mark(key_node)
            result[key] = self.build(value_node, (*path, key))
        return result


def dotted(path: Path_) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _brace_hint(text: str, error: yaml.MarkedYAMLError) -> str | None:
    """The fix, when the syntax error is a template's `{` read as the start of a flow mapping."""
    mark = error.problem_mark
    lines = _LINE_BREAK.split(text)
    if mark is None or mark.line >= len(lines):
        return None
    line = lines[mark.line]
    if line[mark.column : mark.column + 1] == "{" and "flow" in (error.context or ""):
        return FLOW_BRACE_HINT
    if mark.column and line[mark.column - 1] == "}":  # `{region}` was a whole mapping; `/data` follows it
        return LEADING_BRACE_HINT
    return None


def load_yaml(text: str, filename: str) -> tuple[Any, Positions]:
    """Parse one YAML document; raise SpecError with located diagnostics on any problem."""
    try:
        root = compose(yaml.parse(text, Loader=_Loader), filename)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        problem = exc.problem or exc.context or "invalid YAML"
        if _LIBYAML_DEPTH_LIMIT in problem:  # libyaml's own limit (PyYAML >= 6.0.4), far past ours
            raise SpecError([Diagnostic(filename, line, column, "", DEPTH_LIMIT_MESSAGE)]) from None
        hint = _brace_hint(text, exc)
        raise SpecError([Diagnostic(filename, line, column, "", f"YAML syntax error: {problem}", hint=hint)]) from None
    except yaml.YAMLError as exc:
        raise SpecError([Diagnostic(filename, 0, 0, "", f"YAML error: {exc}")]) from None
    if root is None:
        raise SpecError([Diagnostic(filename, 1, 1, "", "the file is empty; expected a pipeline mapping")])
    builder = _Builder(filename)
    data = builder.build(root, ())
    if builder.diagnostics:
        raise SpecError(builder.diagnostics)
    return data, builder.positions
