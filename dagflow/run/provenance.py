"""Where a run's parts came from. Which earlier run produced a cached node: the run whose journal shows that
node succeeding with the cache key the cached record carries (used where a user asks for a cached node's
output). Which search trial gave each region its params (plan/searched.py, as the plan records it). Read-only."""

from __future__ import annotations

from dagflow.plan import Plan
from dagflow.plan.searched import RECORD_KEY, SearchedParams, TrialChoice
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


def searched_params(plan: Plan) -> SearchedParams | None:
    """Where the run's params came from when a search chose them (`params: {from_search}`,
    `--params-from-search`): the search, and per region its trial's number, run and params."""
    recorded = plan.overrides.get(RECORD_KEY)
    return None if recorded is None else SearchedParams.from_dict(recorded)


def model_trials(plan: Plan) -> dict[str, TrialChoice]:
    """The search trial each of the run's models (its train nodes) took its params from, by node."""
    searched = searched_params(plan)
    if searched is None:
        return {}
    found = {}
    for name, node in plan.nodes.items():
        choice = searched.choice_of(node.coords)
        if choice is not None and plan.steps[node.step].kind == "train":
            found[name] = choice
    return found
