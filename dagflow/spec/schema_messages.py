"""Pydantic's schema errors said in the pipeline's language.

Pydantic speaks of its own types ("input should be a valid dictionary or instance of RetrySpec"); a
pipeline's author knows mappings, lists, numbers and the examples in the README. Each error type maps
to what the field expected (a noun: "a whole number", "a mapping such as {...}") or to a rule it broke
(a sentence: "must be at least 1"); a field's errors (one per member of a union) make one message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagflow.text import plural

_TEXT = ("string_type", "string_sub_type", "string_unicode")
_WHOLE = ("int_type", "int_parsing", "int_from_float", "int_parsing_size")
_NUMBER = ("float_type", "float_parsing", "finite_number", "decimal_type", "decimal_parsing")
_BOOL = ("bool_type", "bool_parsing")
_LIST = ("list_type", "tuple_type", "set_type", "frozen_set_type", "iterable_type")
_MAPPING = ("dict_type", "model_type", "model_attributes_type", "mapping_type", "dataclass_type")
NOUNS = {
    **dict.fromkeys(_TEXT, "text"),
    **dict.fromkeys(_WHOLE, "a whole number"),
    **dict.fromkeys(_NUMBER, "a number"),
    **dict.fromkeys(_BOOL, "true or false"),
}

# What a mapping or a list looks like where one goes, by the field's name (the last key of its path); the
# engines' sections add their own (spec/sections.py EngineSection.examples).
MAPPING_EXAMPLES = {
    "retries": "a number such as 2, or a mapping such as {count: 2, unless_exit: [3]}",
    "resources": "a mapping such as {cpus: 4, memory: 8GB, gpus: 1}",
    "promote_if": "a mapping such as {metric: auc, better: higher, than: s3://bucket/models/{region}/latest}",
    "checkpoint": "a mapping such as {files: [ckpt/], exit_code: 85}",
    "runtime": "a mapping such as {python: /opt/venv/bin/python} or {container_image: docker://repo/image:tag}",
    "search": "a mapping such as {objective: {metric: val_loss}, variables: {lr: {type: FLOAT, min: 0.001, max: 0.1}}}",
    "objective": "a mapping such as {metric: val_loss, goal: minimize}",
    "variables": "a mapping of names to variables such as {lr: {type: FLOAT, min: 0.001, max: 0.1}}",
    "early_stopping": "a mapping such as {rule: median, min_steps: 5}",
    "schedule": "a mapping such as {cron: '0 3 * * *'}",
    "steps": "a mapping of step names to steps such as {train: {command: python train.py}}",
    "matrix": "a mapping of axes to values such as {region: [us, br]}",
    "params": "a mapping such as {lr: 0.01, hidden: 128}",
    "env": "a mapping such as {OMP_NUM_THREADS: 4}",
}
STEP_EXAMPLE = "a mapping such as {command: python train.py, needs: [fetch]}"  # a step, under steps.<name>
VARIABLE_EXAMPLE = "a mapping such as {type: FLOAT, min: 0.001, max: 0.1}"  # under search.variables.<name>
MATRIX_VALUES_EXAMPLE = "a list of values such as [us, br]"  # an axis, under matrix.<name>
LIST_EXAMPLES = {
    "needs": "a list of steps such as [fetch]",
    "over": "a list of matrix axes such as [region]",
    "command": "a list such as [python, train.py]",
    "inputs": "a list of paths such as [data/]",
    "outputs": "a list of paths such as [models/]",
    "files": "a list of paths such as [ckpt/]",
    "unless_exit": "a list of exit codes such as [3]",
    "options": "a list of values such as [adam, sgd]",
}
_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "more than"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "less than"),
}


def schema_message(
    errors: Sequence[dict[str, Any]], path: Sequence[str | int], examples: Mapping[str, str] | None = None
) -> str:
    """One message for the errors pydantic reported at one place of the document (path); examples: the
    engines' mapping examples, by field name."""
    nouns: list[str] = []
    rules: list[str] = []
    for error in errors:
        noun = _noun(error, path, examples or {})
        if noun is not None:
            nouns.append(noun)
        else:
            rules.append(_rule(error))
    nouns, rules = list(dict.fromkeys(nouns)), list(dict.fromkeys(rules))
    if rules:
        return " or ".join(rules) + (f" (or {join_or(nouns)})" if nouns else "")
    return f"expected {join_or(nouns)}, not {shown(errors[0]['input'])}"


def join_or(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def shown(value: Any) -> str:
    """The value that was given, as the author wrote it, briefly."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _noun(error: dict[str, Any], path: Sequence[str | int], examples: Mapping[str, str]) -> str | None:
    kind = error["type"]
    field = next((str(part) for part in reversed(path) if isinstance(part, str)), "")
    if kind in _MAPPING:
        return examples.get(field) or _mapping_example(path, field)
    if kind in _LIST:
        in_matrix = len(path) == 2 and path[0] == "matrix"
        return MATRIX_VALUES_EXAMPLE if in_matrix else LIST_EXAMPLES.get(field, "a list such as [a, b]")
    if kind == "literal_error":
        return str(error["ctx"]["expected"])
    return NOUNS.get(kind)


def _mapping_example(path: Sequence[str | int], field: str) -> str:
    parent = str(path[-2]) if len(path) >= 2 else ""
    if parent == "steps" and len(path) == 2:
        return STEP_EXAMPLE
    if parent == "variables":
        return VARIABLE_EXAMPLE
    return MAPPING_EXAMPLES.get(field, "a mapping (key: value)")


def _rule(error: dict[str, Any]) -> str:
    kind, ctx = error["type"], error.get("ctx") or {}
    if kind == "missing":
        return f"missing required key {error['loc'][-1]!r}"
    if kind == "string_pattern_mismatch":
        return f"{error['input']!r} is not allowed here"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"must be {words} {ctx[key]}"
    if kind in ("too_short", "too_long"):
        least = kind == "too_short"
        count = ctx["min_length" if least else "max_length"]
        return f"needs {'at least' if least else 'at most'} {plural(count, 'entry', 'entries')}"
    if kind == "string_too_short":
        count = ctx["min_length"]
        return "must not be empty" if count == 1 else f"needs at least {plural(count, 'character')}"
    if kind == "string_too_long":
        return f"must be at most {plural(ctx['max_length'], 'character')}"
    message = str(error["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        message = message.removeprefix(prefix)
    return message[0].lower() + message[1:] if message else kind
