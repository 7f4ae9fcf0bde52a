"""Package attributes imported on first use (PEP 562), so that importing one light module of a package (an
engine's settings.py, which the CLI reads for every command; spec/units.py; run/layout.py) does not import
the whole package (the engine; the pydantic models; the journal)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for package: each name in exports comes from the submodule it names."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return __getattr__
