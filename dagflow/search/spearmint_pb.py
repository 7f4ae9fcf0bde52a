"""The older Spearmint `config.pb`: protocol-buffer text format, read into the same shape as config.json.

    language: PYTHON
    name: "branin"                       # the main module: branin.py
    variable { name: "X" type: FLOAT size: 2 min: 0 max: 1 }
    variable { name: "Z" type: ENUM size: 1 options: "a" options: "b" }

Only what these files use is supported: `field: scalar` and `field { ... }`, '#' comments, and
double- or single-quoted strings with backslash escapes. Every value keeps its line and column.
Messages nest at most MAX_DEPTH levels (the document itself is the first): the parser recurses once
per level.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dagflow.bounded import MAX_DEPTH
from dagflow.errors import Diagnostic, SpecError

_TOKEN = re.compile(
    r"""(?P<space>[ \t\r]+|\n)
      | (?P<comment>\#[^\n]*)
      | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
      | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
      | (?P<word>[A-Za-z_][A-Za-z0-9_.-]*)
      | (?P<punct>[:{};,])""",
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
_REPEATED = {"variable", "options"}  # fields that may appear more than once


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int
    column: int


@dataclass(frozen=True, slots=True)
class Located:
    """A parsed scalar with the place it came from."""

    value: Any
    line: int
    column: int
    file: str | None = None  # the file it came from, where that is not the config being read (a base config)


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def tokenize(text: str, filename: str) -> list[Token]:
    tokens: list[Token] = []
    line, line_start, pos = 1, 0, 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        column = pos - line_start + 1
        if match is None:
            raise SpecError([Diagnostic(filename, line, column, "", f"unexpected character {text[pos]!r}")])
        kind = match.lastgroup or ""
        if kind == "space" and match.group() == "\n":
            line, line_start = line + 1, match.end()
        elif kind not in ("space", "comment"):
            tokens.append(Token(kind, match.group(), line, column))
        pos = match.end()
    return tokens


class _Parser:
    def __init__(self, tokens: list[Token], filename: str) -> None:
        self.tokens = tokens
        self.filename = filename
        self.index = 0
        self.depth = 1  # the document is a message too

    def error(self, token: Token | None, message: str) -> SpecError:
        if token is None:
            last = self.tokens[-1] if self.tokens else None
            line, column = (last.line, last.column + len(last.text)) if last else (1, 1)
            return SpecError([Diagnostic(self.filename, line, column, "", message + " (at the end of the file)")])
        return SpecError([Diagnostic(self.filename, token.line, token.column, "", message)])

    def peek(self) -> Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> Token | None:
        token = self.peek()
        self.index += 1
        return token

    def message(self, closing: bool) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        while True:
            token = self.peek()
            if token is None:
                if closing:
                    raise self.error(None, "missing '}'")
                return fields
            if token.kind == "punct" and token.text == "}":
                if not closing:
                    raise self.error(token, "unexpected '}'")
                self.index += 1
                return fields
            if token.kind == "punct" and token.text in ";,":
                self.index += 1
                continue
            if token.kind != "word":
                raise self.error(token, f"expected a field name, found {token.text!r}")
            self.index += 1
            value = self.value(token)
            if token.text in _REPEATED:
                fields.setdefault(token.text, []).append(value)
            elif token.text in fields:
                raise self.error(token, f"field {token.text!r} is given twice")
            else:
                fields[token.text] = value

    def value(self, name: Token) -> Any:
        token = self.take()
        if token is not None and token.kind == "punct" and token.text == ":":
            after = self.peek()
            if after is not None and after.kind == "punct" and after.text == "{":
                token = self.take()
            else:
                scalar = self.take()
                if scalar is None or scalar.kind not in ("string", "number", "word"):
                    raise self.error(scalar, f"expected a value for {name.text!r}")
                return Located(self.scalar(scalar), scalar.line, scalar.column)
        if token is not None and token.kind == "punct" and token.text == "{":
            if self.depth == MAX_DEPTH:
                raise self.error(token, f"nested deeper than {MAX_DEPTH} levels")
            self.depth += 1
            fields = self.message(closing=True)
            self.depth -= 1
            return Located(fields, token.line, token.column)
        raise self.error(token, f"expected ':' or '{{' after {name.text!r}")

    @staticmethod
    def scalar(token: Token) -> Any:
        if token.kind == "string":
            return _unquote(token.text)
        if token.kind == "number":
            number = float(token.text)
            return int(number) if number.is_integer() and re.fullmatch(r"[-+]?\d+", token.text) else number
        return {"true": True, "false": False}.get(token.text, token.text)


def parse_pb(text: str, filename: str) -> dict[str, Any]:
    """The document as nested dicts of Located values (repeated fields as lists of them)."""
    parser = _Parser(tokenize(text, filename), filename)
    return parser.message(closing=False)
