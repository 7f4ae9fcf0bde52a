"""Every engine is one module behind the same small contract (engines/base.py)."""

from __future__ import annotations

import inspect

import pytest

from dagflow.engines.base import Engine
from dagflow.engines.condor.engine import CondorEngine
from dagflow.engines.local import LocalEngine
from dagflow.engines.slurm.engine import SlurmEngine


@pytest.mark.parametrize("engine_class", [LocalEngine, CondorEngine, SlurmEngine])
def test_engine_implements_the_contract(engine_class: type) -> None:
    engine = engine_class()
    assert isinstance(engine, Engine)
    for method in ("prepare", "submit", "status", "cancel"):
        expected = list(inspect.signature(getattr(Engine, method)).parameters)
        assert list(inspect.signature(getattr(engine_class, method)).parameters) == expected, method
    assert engine.name in {"local", "condor", "slurm"}
