"""Which earlier run produced a cached node: the run whose journal shows that node succeeding with the
cache key the cached record carries. Read-only; used where a user asks for a cached node's output."""

from __future__ import annotations

from dagflow.run.journal import SUCCEEDED, read_journal
from dagflow.run.layout import RunLayout, list_runs


def producing_run(layout: RunLayout, node: str, key: str) -> RunLayout | None:
    """The newest other run under layout's runs dir in which node succeeded with cache key `key`."""
    runs_dir = layout.runs_dir
    others = [name for name in list_runs(runs_dir) if name != layout.run_id]
    others.sort(key=lambda name: (runs_dir / name / "plan.json").stat().st_mtime, reverse=True)
    for name in others:
        candidate = RunLayout(runs_dir, name)
        record = read_journal(candidate.journal_path).nodes.get(node)
        if record is not None and record.state == SUCCEEDED and record.key == key:
            return candidate
    return None
