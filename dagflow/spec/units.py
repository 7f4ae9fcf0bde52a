"""Sizes and durations as users write them ("16GB", "512M", "90m", "2h")."""

from __future__ import annotations

import math
import re

# Batch systems read K/M/G/T suffixes as powers of 1024 (1G is 1024 MB); GB and GiB are read the same
# way so a pipeline means the same thing on every engine.
_SIZE_FACTORS_MB = {"": 1.0, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0 * 1024}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)
_DURATION_FACTORS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$", re.IGNORECASE)

SIZE_HELP = "a number of MB, or a number with a unit: 512MB, 16GB, 1.5GiB, 1TB"
# A year, leap day included: no node or trial needs a longer limit (leave the timeout out for none), a longer
# value is a typo, and every engine's time field (minutes, 32-bit seconds) holds it.
MAX_DURATION_DAYS = 366
MAX_DURATION_S = MAX_DURATION_DAYS * _DURATION_FACTORS["d"]
DURATION_HELP = f"seconds, or a number with a unit: 90s, 30m, 2h, 1d; at most {MAX_DURATION_DAYS}d"


def parse_size_mb(value: object) -> int:
    """Size in MiB (rounded up); a bare number is MB, as batch systems read a memory request."""
    if isinstance(value, bool):
        raise ValueError(f"expected a size, got {value!r}")
    if isinstance(value, int | float):
        number, unit = float(value), ""
    elif isinstance(value, str) and (match := _SIZE.match(value)):
        number, unit = float(match.group(1)), match.group(2).lower()
    else:
        raise ValueError(f"{value!r} is not a size")
    if number <= 0:
        raise ValueError(f"{value!r} must be greater than zero")
    megabytes = number * _SIZE_FACTORS_MB[unit]
    return max(1, int(-(-megabytes // 1)))


def parse_duration_s(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        number, unit = float(value), "s"
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        number, unit = float(match.group(1)), (match.group(2) or "s").lower()
    else:
        raise ValueError(f"{value!r} is not a duration")
    if math.isnan(number):
        raise ValueError(f"{value!r} is not a duration")
    if number * _DURATION_FACTORS[unit] > MAX_DURATION_S:
        raise ValueError(f"{value!r} is longer than {MAX_DURATION_DAYS} days, the longest duration allowed")
    seconds = int(number * _DURATION_FACTORS[unit])
    if seconds <= 0:
        raise ValueError(f"{value!r} must be at least one second")
    return seconds
