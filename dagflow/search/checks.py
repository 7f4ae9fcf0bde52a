"""Checks of a pipeline's `search:` block that need the whole, valid document, its expansion and the
optimisers: what the field types of spec/model.py cannot say.

`dagflow validate` runs them (check_search), so it refuses what `dagflow search run` would; the search's
trial source (dagflow.search.trials.PipelineTrials) calls metrics_clash from here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dagflow.errors import Diagnostic, SpecError
from dagflow.spec.model import OLD_OPTIMIZER_KEY

if TYPE_CHECKING:
    from dagflow.plan import Plan
    from dagflow.spec.load import Spec


def optimizer_key(spec: Spec) -> str:
    """The key the document names the optimiser with: `optimizer`, or its deprecated old name `engine`."""
    return OLD_OPTIMIZER_KEY if ("search", OLD_OPTIMIZER_KEY) in spec.positions.keys else "optimizer"


def search_diagnostics(spec: Spec, filename: str) -> list[Diagnostic]:
    """Every problem of the search block that would stop `dagflow search run`; [] without a search block."""
    search = spec.model.search
    if search is None:
        return []
    from dagflow.search import OPTIMIZERS

    found: list[Diagnostic] = []
    if search.optimizer not in OPTIMIZERS:
        found.append(_at(spec, filename, ("search", optimizer_key(spec)), f"unknown optimiser {search.optimizer!r}",
                         allowed=", ".join(OPTIMIZERS)))
    found += _variables(spec, filename)
    found += early_stopping_problems(spec, filename)
    steps = metrics_steps(spec)
    if not steps:
        found.append(_at(spec, filename, ("search", "objective"), "no step has `metrics:`: the search reads its "
                         "objective from the evaluate step's metrics file"))
    elif len(steps) > 1:
        found.append(_at(spec, filename, ("search", "objective"),
                         f"several steps write metrics ({', '.join(steps)}); the objective must come from one"))
    else:
        clash = metrics_clash(spec, filename)
        found += [clash] if clash else []
    return found


def check_search(spec: Spec, filename: str | None = None) -> None:
    """The checks `dagflow search run` makes of a search: block (SpecError with every problem found).

    Not part of parse_spec: a plain run does not run trials, so a search block that could not run in
    parallel does not stop it; `dagflow validate` and `dagflow search run` make these checks.
    """
    problems = search_diagnostics(spec, filename or str(spec.file))
    if problems:
        raise SpecError(problems)


def metrics_steps(spec: Spec) -> list[str]:
    return [name for name, step in spec.model.steps.items() if step.metrics]


def metrics_clash(spec: Spec, filename: str, search_name: str | None = None) -> Diagnostic | None:
    """Trials that run at the same time must not write one metrics file: compare the files of two
    trials of the first region (when parallel > 1) and of one trial per region."""
    from dagflow.plan.expand import expand
    from dagflow.run.resources.auto import AutoResources

    search, model = spec.model.search, spec.model
    assert search is not None
    name = search_name or model.name
    [objective_step] = metrics_steps(spec)
    regions = list(model.matrix[search.per]) if search.per else [""]
    defaults = {variable: model.params[variable] for variable in search.variables if variable in model.params}
    # run ids shaped like the scheduler's, <search>-t<N>[-<region>]: regions' searches run side by side
    pairs = [(f"{name}-tA-{region}" if region else f"{name}-tA", region) for region in regions]
    if search.parallel > 1:
        pairs.append((f"{name}-tB-{regions[0]}" if regions[0] else f"{name}-tB", regions[0]))
    owner: dict[str, str] = {}
    for run_id, region in pairs:
        try:
            plan = expand(spec, run_id=run_id, params=defaults, trial=0, resolve=AutoResources(spec).resolve)
        except SpecError:
            return None  # the expansion's own errors are reported where the plan is made
        for path in _metrics_paths(plan, objective_step, search.per, region):
            if path in owner and owner[path] != run_id:
                return _at(
                    spec, filename, ("steps", objective_step, "metrics"),
                    f"every trial would write the same metrics file {path!r}; parallel trials would "
                    "overwrite each other's objective",
                    hint="put {run.id} in the path (each trial is its own run), e.g. out/{run.id}/metrics.json",
                )
            owner[path] = run_id
    return None


def _metrics_paths(plan: Plan, step: str, per: str | None, region: str) -> list[str]:
    """The metrics files of `step` in a trial: with `per`, the region's sub-DAG (its nodes and their ancestors)."""
    keep = set(plan.nodes)
    if per:
        keep = set()
        stack = [name for name, node in plan.nodes.items() if node.coords.get(per) == region]
        while stack:
            name = stack.pop()
            if name not in keep:
                keep.add(name)
                stack.extend(plan.nodes[name].parents)
    return [node.metrics for name, node in plan.nodes.items() if name in keep and node.step == step and node.metrics]


def _variables(spec: Spec, filename: str) -> list[Diagnostic]:
    from dagflow.search.space import SearchSpace  # numpy: only for pipelines that search

    assert spec.model.search is not None
    try:
        SearchSpace(spec.model.search.variables)
    except ValueError as error:
        return [_at(spec, filename, ("search", "variables"), str(error))]
    return []


def early_stopping_problems(spec: Spec, filename: str) -> list[Diagnostic]:
    """What the field types cannot say: which fields belong to which rule, and that rungs fit below max_steps."""
    assert spec.model.search is not None
    stopping = spec.model.search.early_stopping
    if stopping is None:
        return []
    found: list[Diagnostic] = []
    if stopping.rule != "asha":
        for field in ("reduction_factor", "max_steps"):
            if getattr(stopping, field) is not None:
                found.append(_at(spec, filename, ("search", "early_stopping", field),
                                 f"{field} is for rule: asha (successive halving), not rule: {stopping.rule}"))
    elif stopping.max_steps is not None and stopping.max_steps <= stopping.min_steps:
        found.append(_at(spec, filename, ("search", "early_stopping", "max_steps"),
                         f"max_steps ({stopping.max_steps}) must be above min_steps ({stopping.min_steps}), "
                         "the first rung"))
    return found


def _at(spec: Spec, filename: str, path: tuple[str, ...], message: str, *, allowed: str | None = None,
        hint: str | None = None) -> Diagnostic:
    line, column = spec.positions.of(path)
    return Diagnostic(filename, line, column, ".".join(path), message, allowed, hint)
