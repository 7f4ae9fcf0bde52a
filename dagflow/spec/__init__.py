"""The Spec: the user's pipeline document, typed, validated, and traced to file:line:column."""

from dagflow.spec.load import Spec, load_spec, parse_spec

__all__ = ["Spec", "load_spec", "parse_spec"]
