"""Quoting for every context a user's value can reach in generated HTCondor files.

Each function returns text that HTCondor's parser reads back as exactly the caller's literal value,
or raises ValueError. Values are nested: a node's argv is quoted for the submit language (new-syntax
arguments), then for DAGMan VARS; the submit parser expands macros in VARS values, so a `$` is
written `$(DOLLAR)`, the macro that expands to a literal `$`.

`$(DOLLAR)` is not a perfect escape (measured against htcondor2.Submit): `$(DOLLAR)$(DOLLAR)` reads
back as `$$(DOLLAR)` (a match-time `$$(` reference), a literal `$(DOLLAR)` collapses to `$`, and a
`$NAME(` function form swallows later dollars. So a run of dollars is written `$(DOLLAR)$$...`, and
the few values no spelling can carry (`$$(`, `$NAME(`, a literal `$(DOLLAR)`) are refused.

Line breaks and other control characters cannot be carried by any of these formats (a newline
would start a new submit command or DAG line), so they are refused everywhere.
"""

from __future__ import annotations

import math
import re

from dagflow.text import CONTROL_CHARACTERS

_FORBIDDEN = CONTROL_CHARACTERS
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MACRO_NAME = re.compile(r"[A-Za-z0-9_]+")
# DAGMan node names: no whitespace or quotes; `+` separates splice names, so it is kept out too.
# PARENT, CHILD and ALL_NODES (any case) are DAG-file keywords.
_NODE_NAME = re.compile(r"(?!(?i:PARENT|CHILD|ALL_NODES)\Z)[A-Za-z0-9_][A-Za-z0-9_.-]*")
_DOLLAR_RUN = re.compile(r"\$+")
_FUNCTION_FORM = re.compile(r"\$[A-Za-z_][A-Za-z0-9_]*\(")
_DOLLAR_MACRO = re.compile(r"\$\(dollar\)", re.IGNORECASE)

DOLLAR = "$(DOLLAR)"


def check_text(value: str, what: str = "value") -> str:
    """Return value unchanged, or raise ValueError if it holds a character no format can carry."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, not {type(value).__name__}")
    bad = None if value.isprintable() else _FORBIDDEN.search(value)  # isprintable: a faster first pass
    if bad:
        raise ValueError(
            f"{what} contains control character {bad.group()!r} at position {bad.start()}; "
            "line breaks and control characters cannot be passed to HTCondor"
        )
    return value


def inert_dollars(text: str, what: str = "value") -> str:
    """Rewrite every `$` of finished submit text so macro expansion gives back exactly text."""
    if "$" not in text:
        return text
    if _FUNCTION_FORM.search(text) or _DOLLAR_MACRO.search(text):
        raise ValueError(
            f"{what} contains `$NAME(` or `$(DOLLAR)`, which HTCondor's submit language always expands; "
            "it cannot be passed literally"
        )

    def run(match: re.Match[str]) -> str:
        following = text[match.end() : match.end() + 1]
        if len(match.group()) > 1 and following and (following in "([{_" or following.isalnum()):
            raise ValueError(
                f"{what} contains `$$` followed by {following!r}, which HTCondor expands at match time; "
                "it cannot be passed literally"
            )
        return DOLLAR + "$" * (len(match.group()) - 1)

    return _DOLLAR_RUN.sub(run, text)


def submit_literal(value: str, what: str = "value") -> str:
    """A value written directly after `command = ` in a submit description: `$` made inert.

    The submit language trims the value and reads a trailing backslash as a line continuation
    (it would swallow the next command), so those are refused rather than altered.
    """
    check_text(value, what)
    if not value or value != value.strip():
        raise ValueError(f"{what} {value!r} must not be empty or start or end with whitespace")
    if value.endswith("\\"):
        raise ValueError(f"{what} {value!r} must not end with a backslash (a submit-file line continuation)")
    return inert_dollars(value, what)


def classad_string(value: str, what: str = "value") -> str:
    """A ClassAd string literal (same result as classad2.quote), made safe for submit text."""
    check_text(value, what)
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return inert_dollars(quoted, what)


def classad_value(value: str | int | float | bool, what: str = "value") -> str:
    """A ClassAd literal for a custom attribute value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be a finite number, not {value!r}")
        return repr(value)
    if isinstance(value, str):
        return classad_string(value, what)
    raise ValueError(f"{what} must be a string, number or boolean, not {type(value).__name__}")


def _v2_quote(text: str) -> str:
    """One argument or environment value in HTCondor's new (V2) syntax: single-quoted, '' for '."""
    return "'" + text.replace("'", "''") + "'"


def arguments(argv: list[str], what: str = "command") -> str:
    """The inside of a new-syntax `arguments = "..."` command: every argument single-quoted.

    Inside the surrounding double quotes a literal `"` is written `""`; the backslash has no
    special meaning in the new syntax.
    """
    # \x1f (a control character, so never inside a checked argument) marks the argument breaks,
    # letting the quoting run as whole-string operations.
    raw = "'" + "\x1f".join(argv).replace("'", "''").replace("\x1f", "' '") + "'"
    # one scan for the whole line (every control character is unprintable; isprintable is the faster scan);
    # name the argument only on failure
    if not raw.isprintable() and _FORBIDDEN.search(raw):
        for index, arg in enumerate(argv):
            check_text(arg, f"{what} argument {index}")
    return inert_dollars(raw.replace('"', '""'), what)


def environment(env: dict[str, str], what: str = "environment") -> str:
    """The inside of a new-syntax `environment = "..."` command: NAME='value' entries."""
    entries = []
    for name, value in env.items():
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"{what} variable name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
        check_text(value, f"{what} variable {name}")
        entries.append(name + "=" + _v2_quote(value))
    return inert_dollars(" ".join(entries).replace('"', '""'), what)


def vars_escape(text: str) -> str:
    """The inside of a DAGMan VARS value: `\\` and `"` backslash-escaped (the quotes go around it)."""
    if "\\" in text or '"' in text:
        return text.replace("\\", "\\\\").replace('"', '\\"')
    return text


def macro_name(name: str) -> str:
    """A VARS macro name: [A-Za-z0-9_]+ and not starting with `queue` (DAGMan's rules)."""
    if not _MACRO_NAME.fullmatch(name):
        raise ValueError(f"macro name {name!r} must match [A-Za-z0-9_]+")
    if name.lower().startswith("queue"):
        raise ValueError(f"macro name {name!r} must not start with 'queue'")
    return name


def attribute_name(name: str, what: str = "attribute") -> str:
    """A ClassAd attribute name."""
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{what} name {name!r} must match [A-Za-z_][A-Za-z0-9_]*")
    return name


POOL_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.@+:-]*"  # accounting groups, users, batch names (manners.py)
_POOL_NAME = re.compile(POOL_NAME)


def pool_name(value: str, what: str = "name") -> str:
    """An accounting group, accounting group user or batch name: letters, digits and `_.@+:-` only, so it
    can be written bare after `command = ` or inside a ClassAd string as it is."""
    if not _POOL_NAME.fullmatch(value):
        raise ValueError(f"{what} {value!r} may hold only letters, digits and _ . @ + : - (and not start with "
                         "one of . @ + : -)")
    return value


def node_name(name: str) -> str:
    """A DAGMan node name (also used in file names)."""
    if not _NODE_NAME.fullmatch(name):
        raise ValueError(
            f"node name {name!r} cannot be used in a DAG: allowed are letters, digits, '_', '.' and '-' "
            "(not starting with '.' or '-'), and not PARENT, CHILD or ALL_NODES"
        )
    return name


def dag_path(path: str, what: str = "path") -> str:
    """A file path written as a bare DAG-file token: no whitespace, quotes or control characters."""
    check_text(path, what)
    if not path or any(ch.isspace() or ch in "\"'" for ch in path):
        raise ValueError(f"{what} {path!r} must not be empty or contain whitespace or quotes (DAG files split on them)")
    return path
