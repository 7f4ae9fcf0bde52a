"""Every engine is one module behind the same contract (engines/base.py), reached through the registry."""

from __future__ import annotations

import inspect

import pytest

from dagflow.engines.base import RESOURCE_FIELDS, Engine, EngineOption
from dagflow.engines.registry import engine_class, engine_names, load_engine

CONTRACT = ("prepare", "submit", "resume", "wait", "status", "read_status", "cancel", "run", "submitted", "cancelled")


@pytest.mark.parametrize("name", ["local", "condor", "slurm"])
def test_engine_implements_the_contract(name: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    engine = load_engine(name, tmp_path)
    assert isinstance(engine, Engine)
    assert engine.name == name and engine_class(name).summary
    for method in CONTRACT:
        expected = list(inspect.signature(getattr(Engine, method)).parameters)
        assert list(inspect.signature(getattr(type(engine), method)).parameters) == expected, (name, method)
    assert set(engine_class(name).honours) <= set(RESOURCE_FIELDS)
    assert all(isinstance(option, EngineOption) for option in engine_class(name).options)


def test_the_builtin_engines_are_registered() -> None:
    assert engine_names()[:3] == ["local", "condor", "slurm"]
