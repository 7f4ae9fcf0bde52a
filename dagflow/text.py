"""Characters no generated file can carry: a line break would start a new submit command or DAG line."""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def inert(text: str) -> str:
    """text with every control character but the tab shown as its escape (ESC as `\\x1b`), for printing
    text a job wrote: an escape sequence in it can then not recolour, retitle or clear the terminal."""
    return CONTROL_CHARACTERS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\t":
        return char
    return f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 node`, `2 nodes`, `0 nodes`: count with the noun agreeing (nouns: an irregular plural)."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
