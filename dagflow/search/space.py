"""The search space: a spec's variables as points of the unit hypercube, and back.

Every optimiser works on [0, 1]^dim. Each element of a variable (a variable of `size` k has k) owns
a slice of the unit vector:

- FLOAT: one coordinate, linear or logarithmic between min and max.
- INT: one coordinate over [min - 0.5, max + 0.5] (log-scaled when asked), rounded on decode, so
  every integer gets an equal share of the unit interval (Spearmint's convention).
- ENUM: one coordinate per option (one-hot); decode takes the largest.

Decoded parameters are plain Python values: a scalar for size 1, a list for size > 1.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dagflow.spec.model import VariableSpec

Params = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Variable:
    """One named variable of the space; `start` is the first unit coordinate of its first element."""

    name: str
    type: str  # FLOAT | INT | ENUM
    size: int
    start: int
    low: float = 0.0  # FLOAT/INT: bounds of the continuous interval, in log space when log
    high: float = 1.0
    log: bool = False
    min: float = 0.0  # FLOAT: the bounds as given (exp(log(min)) need not give min back exactly)
    max: float = 1.0
    int_min: int = 0
    int_max: int = 0
    options: tuple[Any, ...] = ()

    @property
    def width(self) -> int:
        """Unit coordinates per element."""
        return len(self.options) if self.type == "ENUM" else 1

    @property
    def stop(self) -> int:
        return self.start + self.size * self.width

    def _scalar_to_unit(self, value: Any) -> list[float]:
        if self.type == "ENUM":
            try:
                index = self.options.index(value)
            except ValueError:
                raise ValueError(f"{self.name}: {value!r} is not one of {list(self.options)}") from None
            return [1.0 if i == index else 0.0 for i in range(len(self.options))]
        number = float(value)
        if math.isnan(number):
            raise ValueError(f"{self.name}: NaN is not a value")
        if self.log:
            if number <= 0:
                raise ValueError(f"{self.name}: {number} is not positive (log scale)")
            number = math.log(number)
        return [min(1.0, max(0.0, (number - self.low) / (self.high - self.low)))]

    def encode(self, value: Any) -> list[float]:
        elements = _elements(value)
        if len(elements) != self.size:
            raise ValueError(f"{self.name}: expected {self.size} value(s), got {len(elements)}")
        out: list[float] = []
        for element in elements:
            out.extend(self._scalar_to_unit(element))
        return out

    def decode(self, unit: np.ndarray) -> Any:
        """Values of this variable from a full unit vector."""
        block = unit[self.start : self.stop].reshape(self.size, self.width)
        if self.type == "ENUM":
            values: list[Any] = [self.options[int(np.argmax(row))] for row in block]
        else:
            raw = self.low + np.clip(block[:, 0], 0.0, 1.0) * (self.high - self.low)
            if self.log:
                raw = np.exp(raw)
            if self.type == "INT":
                values = [int(min(self.int_max, max(self.int_min, round(float(x))))) for x in raw]
            else:
                values = [min(self.max, max(self.min, float(x))) for x in raw]
        return values[0] if self.size == 1 else values


def _elements(value: Any) -> list[Any]:
    if isinstance(value, np.ndarray):
        return value.reshape(-1).tolist()
    if isinstance(value, list | tuple):
        return list(value)
    return [value]


def _variable(name: str, spec: VariableSpec, start: int) -> Variable:
    if spec.type == "ENUM":
        assert spec.options is not None  # VariableSpec guarantees it
        if len(set(map(repr, spec.options))) != len(spec.options):
            raise ValueError(f"{name}: ENUM options must be distinct")
        return Variable(name, "ENUM", spec.size, start, options=tuple(spec.options))
    assert spec.min is not None and spec.max is not None
    log = spec.scale == "log"
    if spec.type == "FLOAT":
        low, high = (math.log(spec.min), math.log(spec.max)) if log else (spec.min, spec.max)
        return Variable(name, "FLOAT", spec.size, start, low=low, high=high, log=log, min=spec.min, max=spec.max)
    int_min, int_max = math.ceil(spec.min), math.floor(spec.max)
    if int_min > int_max:
        raise ValueError(f"{name}: no integer lies between min {spec.min} and max {spec.max}")
    low, high = int_min - 0.5, int_max + 0.5
    if log:
        low, high = math.log(low), math.log(high)
    return Variable(name, "INT", spec.size, start, low=low, high=high, log=log, int_min=int_min, int_max=int_max)


class SearchSpace:
    """Variables in a fixed order, with encode (params -> unit vector) and decode (unit vector -> params)."""

    def __init__(self, variables: Mapping[str, VariableSpec]) -> None:
        if not variables:
            raise ValueError("a search space needs at least one variable")
        self.specs: dict[str, VariableSpec] = dict(variables)
        self.variables: list[Variable] = []
        start = 0
        for name, spec in variables.items():
            variable = _variable(name, spec, start)
            self.variables.append(variable)
            start = variable.stop
        self.dim = start
        discrete = np.zeros(self.dim, dtype=bool)
        for variable in self.variables:
            if variable.type != "FLOAT":
                discrete[variable.start : variable.stop] = True
        self.discrete: np.ndarray = discrete

    @property
    def names(self) -> list[str]:
        return [variable.name for variable in self.variables]

    def encode(self, params: Mapping[str, Any]) -> np.ndarray:
        missing = [name for name in self.names if name not in params]
        if missing:
            raise ValueError(f"missing parameter(s): {', '.join(missing)}")
        unit: list[float] = []
        for variable in self.variables:
            unit.extend(variable.encode(params[variable.name]))
        return np.asarray(unit, dtype=float)

    def encode_many(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        if not points:
            return np.empty((0, self.dim))
        return np.vstack([self.encode(point) for point in points])

    def decode(self, unit: np.ndarray) -> Params:
        unit = np.asarray(unit, dtype=float).reshape(-1)
        if unit.shape[0] != self.dim:
            raise ValueError(f"expected a vector of length {self.dim}, got {unit.shape[0]}")
        return {variable.name: variable.decode(unit) for variable in self.variables}

    def snap(self, units: np.ndarray) -> np.ndarray:
        """The canonical unit vector of each row: what encode(decode(row)) gives, vectorised.

        Two rows that decode to the same parameters snap to the same vector.
        """
        out = np.clip(np.array(units, dtype=float, ndmin=2), 0.0, 1.0)
        if not len(out):
            return out.reshape(0, self.dim)
        for variable in self.variables:
            if variable.type == "FLOAT":
                continue
            block = out[:, variable.start : variable.stop].reshape(len(out), variable.size, variable.width)
            if variable.type == "ENUM":
                hot = np.zeros_like(block)
                np.put_along_axis(hot, block.argmax(axis=2)[..., None], 1.0, axis=2)
                block = hot
            else:
                raw = variable.low + block * (variable.high - variable.low)
                if variable.log:
                    raw = np.exp(raw)
                ints = np.clip(np.round(raw), variable.int_min, variable.int_max)
                pos = np.log(ints) if variable.log else ints
                block = np.clip((pos - variable.low) / (variable.high - variable.low), 0.0, 1.0)
            out[:, variable.start : variable.stop] = block.reshape(len(out), -1)
        return out

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """n uniform random unit vectors (already snapped)."""
        return self.snap(rng.random((n, self.dim)))
