"""Continuing a run after its pipeline file was edited: the plan expanded again from the file, and which
nodes the edit changed (their own fingerprint, their parents, or any ancestor's). Every engine's resume
uses it the same way: finished nodes the edit did not change stay finished, the rest run again.

A run remembers the sha256 of the pipeline file it was planned from (`pipeline.sha256`, written when
the run directory is created: RunLayout.create); runs planned from something else (a plan file, a search
trial) have none and are never re-planned.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from dagflow.plan import Plan
from dagflow.run.layout import RunLayout, file_hash, pipeline_path
from dagflow.spec.load import SpecCheck


def replanned(layout: RunLayout, plan: Plan, checks: Sequence[SpecCheck] = ()) -> Plan | None:
    """The plan expanded again from its pipeline file when that file changed since the run was planned
    and gives a different plan; else None. checks: the engines' spec checks (engines/registry.py
    spec_checks) the edited file is loaded with, as the run's engine gives them."""
    from dagflow.plan.overrides import Overrides, plan_with
    from dagflow.run.resources.auto import AutoResources
    from dagflow.spec import load_spec

    source = pipeline_path(plan)
    try:
        recorded = layout.pipeline_hash_path.read_text().strip()
    except OSError:
        return None  # planned from something else (a plan file, a search trial), or by an older dagflow
    if source is None or file_hash(source) == recorded:
        return None
    spec = load_spec(source, checks)
    fresh = plan_with(spec, plan.run_id, Overrides.from_dict(plan.overrides), resolve=AutoResources(spec).resolve)
    fresh = dataclasses.replace(fresh, workdir=os.path.abspath(fresh.workdir), source=plan.source)
    return None if fresh.to_json() == plan.to_json() else fresh


def changed_nodes(old: Plan, new: Plan) -> frozenset[str]:
    """Nodes of new that differ from old: their own fingerprint or parents, or any ancestor's."""
    changed: set[str] = set()
    for name, node in new.nodes.items():  # topological order: parents first
        before = old.nodes.get(name)
        if (
            before is None
            or sorted(before.parents) != sorted(node.parents)
            or any(parent in changed for parent in node.parents)
            or old.node_fingerprint(before) != new.node_fingerprint(node)
        ):
            changed.add(name)
    return frozenset(changed)
