"""The Spec: the user's pipeline document, typed, validated, and traced to file:line:column."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagflow.lazy import lazy_exports

if TYPE_CHECKING:
    from dagflow.spec.load import Spec, load_spec, parse_spec

_EXPORTS = {"Spec": "load", "load_spec": "load", "parse_spec": "load"}
__all__ = ["Spec", "load_spec", "parse_spec"]

__getattr__ = lazy_exports(__name__, _EXPORTS)  # imported on first use: see dagflow/lazy.py
