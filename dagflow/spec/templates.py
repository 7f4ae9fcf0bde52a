"""Template fields: "{region}", "{params.lr}", "{run.id}", "{step}", "{inputs[0]}"; "{{" and "}}" are literal
braces.

A template is parsed once per step into literal and variable parts, then rendered per node by a join,
which keeps expansion of 100k+ nodes cheap.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")
VARIABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*|\[[0-9]+\])?$")
# {inputs} and {outputs}: a step's own paths in its command; {inputs[0]} one of them (plan/file_words.py)
FILE_FIELDS = ("inputs", "outputs")
FILE_VARIABLE = re.compile(r"^(inputs|outputs)(?:\[([0-9]+)\])?$")


# {gpu.memory_mb}: the memory of the GPU a node actually got, known only once it is placed; a plan holds
# a mark there that each engine fills in when the node starts (dagflow/gpu_memory.py).
class TemplateError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Template:
    parts: tuple[str, ...]  # literal text at even indices, variable names at odd indices
    # render() of a template with several variables: one %-format over an itemgetter, measured
    # faster than joining the parts per node
    _format: str = field(init=False, repr=False, compare=False)
    _values: Callable[[Mapping[str, str]], tuple[str, ...]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names = self.parts[1::2]
        object.__setattr__(self, "_format", "%s".join(part.replace("%", "%%") for part in self.parts[0::2]))
        object.__setattr__(self, "_values", itemgetter(*names) if len(names) > 1 else None)

    @property
    def variables(self) -> tuple[str, ...]:
        return self.parts[1::2]

    @property
    def is_constant(self) -> bool:
        return len(self.parts) == 1

    def render(self, context: Mapping[str, str]) -> str:
        parts = self.parts
        if len(parts) == 1:
            return parts[0]
        if len(parts) == 3:
            return parts[0] + context[parts[1]] + parts[2]
        return self._format % self._values(context)  # type: ignore[misc]


def parse_template(text: str) -> Template:
    parts: list[str] = []
    literal: list[str] = []
    position = 0
    for match in _TOKEN.finditer(text):
        literal.append(text[position : match.start()])
        position = match.end()
        token = match.group(0)
        if token == "{{":
            literal.append("{")
        elif token == "}}":
            literal.append("}")
        elif match.group(1) is None:
            raise TemplateError(
                f"unmatched {token!r} at character {match.start() + 1}; write {token * 2} for a literal brace"
            )
        else:
            name = match.group(1).strip()
            if not VARIABLE_NAME.match(name):
                raise TemplateError(
                    f"{{{match.group(1)}}} is not a template variable; write {{{{ and }}}} for literal braces"
                )
            parts.append("".join(literal))
            parts.append(name)
            literal = []
    literal.append(text[position:])
    parts.append("".join(literal))
    return Template(tuple(parts))
