"""Cron expressions as Debian's cron reads them: five fields, numbers, `*`, ranges, lists and steps,
three-letter month and weekday names, and the @daily-style macros.

normalize() turns an expression into the plain numeric five-field form dagflow writes everywhere (a
crontab line, a batch system's cron settings), so both read it the same way; next_fire_times() says when it
will fire, computed by cronsim, which follows Debian cron's rules (including its day-of-month /
day-of-week 'or').
"""

from __future__ import annotations

import re
from datetime import datetime

from cronsim import CronSim, CronSimError

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
FIELDS = (("minute", 0, 59), ("hour", 0, 23), ("day of month", 1, 31), ("month", 1, 12), ("day of week", 0, 7))
FORM = "five fields: minute hour day-of-month month day-of-week, e.g. '0 3 * * *', or @daily, @hourly, @weekly"
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTHS = {name: str(number) for number, name in enumerate(_MONTH_NAMES, 1)}
_DAYS = {name: str(number) for number, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_NAME = re.compile(r"[A-Za-z]+")
_SYNTAX = re.compile(r"^[0-9*,/-]+$")
_TERM = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?$")


class CronError(ValueError):
    """An expression cron would not accept; the message says which field and why."""


def _names(field: str, names: dict[str, str], what: str) -> str:
    def number(match: re.Match[str]) -> str:
        word = match.group(0).lower()
        if word not in names:
            raise CronError(f"{what} field: {match.group(0)!r} is not a {what} name (allowed: {', '.join(names)})")
        return names[word]

    return _NAME.sub(number, field)


def _check_field(field: str, name: str, low: int, high: int) -> None:
    if not _SYNTAX.match(field):
        raise CronError(
            f"{name} field {field!r}: only numbers, *, ranges (1-5), lists (1,3) and steps (*/15) work here"
        )
    for term in field.split(","):
        if not _TERM.match(term):
            raise CronError(f"{name} field {field!r}: {term!r} is not a number, *, a range or a step")
        values, _, step = term.partition("/")
        if step and int(step) == 0:
            raise CronError(f"{name} field {field!r}: a step of 0 never advances")
        for value in values.split("-") if values != "*" else ():
            if not low <= int(value) <= high:
                raise CronError(f"{name} field {field!r}: {value} is out of range ({low}-{high})")
        if "-" in values and int(values.split("-")[0]) > int(values.split("-")[1]):
            raise CronError(f"{name} field {field!r}: the range {values} runs backwards")


def normalize(expression: str) -> str:
    """The numeric five-field form of a cron expression; CronError if cron would not run it."""
    text = " ".join(str(expression).split())
    if not text:
        raise CronError("the cron expression is empty")
    if text.startswith("@"):
        if text.lower() == "@reboot":
            raise CronError("@reboot is not a schedule with fire times")
        if text.lower() not in MACROS:
            raise CronError(f"unknown cron macro {text!r} (allowed: {', '.join(MACROS)})")
        text = MACROS[text.lower()]
    fields = text.split(" ")
    if len(fields) != 5:
        raise CronError(f"a cron expression has five fields, this one has {len(fields)}")
    fields[3] = _names(fields[3], _MONTHS, "month")
    fields[4] = _names(fields[4], _DAYS, "day of week")
    for field, (name, low, high) in zip(fields, FIELDS, strict=True):
        _check_field(field, name, low, high)
    normalized = " ".join(fields)
    try:
        next(iter(CronSim(normalized, datetime(2000, 1, 1))))
    except (CronSimError, StopIteration) as error:
        raise CronError(f"{normalized!r} never fires: {str(error).lower()}") from None
    return normalized


def next_fire_times(expression: str, after: datetime, count: int = 3) -> list[datetime]:
    """The next count times the expression fires after `after` (local time, as cron uses)."""
    times = CronSim(normalize(expression), after)
    return [next(times) for _ in range(count)]
