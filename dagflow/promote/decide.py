"""The promotion decision: is the new model's metric better than the current model's?"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json, read_bounded
from dagflow.errors import DagflowError

PROMOTED, KEPT, FAILED = "promoted", "kept", "failed"


class PromotionInputError(DagflowError):
    """A metrics file or pointer that cannot be compared: rerunning will not help (exit 2)."""


@dataclass(frozen=True, slots=True)
class Decision:
    verdict: str  # promoted | kept
    reason: str


def metric_value(metrics: dict[str, Any], metric: str, where: str) -> float:
    value = metrics.get(metric)
    number = _finite(value)
    if number is None:
        shown = "missing" if metric not in metrics else _shown(value)
        allowed = ", ".join(k for k, v in metrics.items() if _finite(v) is not None)
        raise PromotionInputError(f"{where}: metric {metric!r} is {shown}, not a finite number (numbers there: "
                                  f"{allowed or 'none'})")
    return number


def _finite(value: Any) -> float | None:
    """value as a float if it is a finite number; JSON integers too large for a float are not."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and _finite(value) is None:
        return f"an integer of about {int(value.bit_length() * math.log10(2)) + 1} digits, too large for a float"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def read_metrics(path: str) -> dict[str, Any]:
    try:
        data = loads_json(read_bounded(path))
    except FileNotFoundError:
        raise PromotionInputError(f"metrics file {path} does not exist: did the evaluate step write it?") from None
    except (OSError, BoundedInputError) as error:
        raise PromotionInputError(f"metrics file {path} is not readable JSON: {error}") from None
    if not isinstance(data, dict):
        raise PromotionInputError(f"metrics file {path} must hold a JSON object of metric names to values")
    return data


def decide(new: float, old: float | None, metric: str, better: str, min_delta: float = 0.0) -> Decision:
    if old is None:
        return Decision("promoted", f"{metric} {new:.6g}; there was no current model")
    improvement = old - new if better == "lower" else new - old
    relation = "<" if better == "lower" else ">"
    if improvement > min_delta:
        return Decision("promoted", f"{metric} {new:.6g} {relation} {old:.6g} of the current model")
    needed = f" by more than {min_delta:g}" if min_delta else ""
    return Decision("kept", f"{metric} {new:.6g} is not {better}{needed} than {old:.6g} of the current model")
