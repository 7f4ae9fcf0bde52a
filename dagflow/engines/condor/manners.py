"""Shared-pool manners: whose share of the pool a run's jobs count against (HTCondor's `accounting_group`
and `accounting_group_user` submit commands, written into every node's submit file) and the name the run's
jobs are shown under in `condor_q` (DAGMan's `-batch-name`, which its node jobs inherit; the run id when
none is given).

Set in the pipeline's `condor:` block (sections.py) or by the flags of the same names (settings.py),
which win. The values are names, not text: only NAME_PATTERN's characters, so that no value can end a
submit line, quote its way out of a ClassAd string or expand a `$(...)` macro; escape.py checks again where
they are written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dagflow.engines.condor import escape
from dagflow.engines.condor.step_fields import SECTION

FIELDS = ("accounting_group", "accounting_group_user", "batch_name")


@dataclass(frozen=True, slots=True)
class Manners:
    accounting_group: str | None = None
    accounting_group_user: str | None = None
    batch_name: str | None = None

    @classmethod
    def of(cls, declared: Mapping[str, Any], settings: Mapping[str, Any]) -> Manners:
        """The flags' values (settings), else the pipeline's condor block (declared)."""
        values = {name: settings.get(name) or declared.get(name) for name in FIELDS}
        return cls(**{name: None if value is None else escape.pool_name(str(value), name)
                      for name, value in values.items()})  # fmt: skip

    def submit_lines(self) -> list[str]:
        """The node submit file's accounting lines (none when neither is set: the file is as before)."""
        lines = []
        for command in ("accounting_group", "accounting_group_user"):
            value = getattr(self, command)
            if value is not None:
                lines.append(f"{command:<24} = {escape.pool_name(value, command)}")
        return lines


def declared(engine_defaults: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pipeline's condor block as the plan carries it."""
    return engine_defaults.get(SECTION, {})
