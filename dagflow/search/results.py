"""A finished search's results for production: each region's best trial, as `dagflow search status` shows it
(report.summarise, best.reported_best), checked against the pipeline that takes them. plan/searched.py
applies them; this module only reads the search database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from dagflow.errors import DagflowError, closest
from dagflow.plan.searched import SearchedParams, TrialChoice
from dagflow.spec.load import Spec
from dagflow.text import plural


class SearchResultError(DagflowError):
    pass


def searched_params(
    db: Path, name: str, spec: Spec, only: Mapping[str, Sequence[str]] | None = None
) -> SearchedParams:
    """The best trial of each region the run includes (every value of the search's axis, or those --only
    keeps); SearchResultError for a search that is unknown, still running, stopped before its budget, without
    a result for a region, or whose params are not the pipeline's."""
    from dagflow.search.report import summarise
    from dagflow.search.store import SearchStore

    store = SearchStore(db)
    try:
        record = store.search(name)
        if record is None:
            names = store.search_names()
            hint = closest(name, names)
            hint = f"; {hint}" if hint else ""
            raise SearchResultError(f"no search {name!r} in {db} (its searches: {', '.join(names) or 'none'}){hint}")
        trials = store.trials(name)
    finally:
        store.close()
    if record.kind != "pipeline":
        raise SearchResultError(f"search {name!r} in {db} ran a Spearmint experiment, not a pipeline: its params "
                                "are no pipeline's")  # fmt: skip
    summary = summarise(record, trials)
    axis = _axis(spec, name, [region for region in summary["regions"] if region])
    values = [""] if axis is None else [v for v in spec.model.matrix[axis] if v in (only or {}).get(axis, [v])]
    running = {region: info["in_flight"] for region, info in summary["regions"].items() if info["in_flight"]}
    if running:
        counts = ", ".join(plural(n, "trial") + (f" for {region}" if region else "") for region, n in running.items())
        raise SearchResultError(
            f"search {name!r} is still running ({counts} in flight): wait for it to end "
            f"(`dagflow search status {name}`), or, if its scheduler was stopped, finish it with "
            f"`dagflow search run PIPELINE --name {name}`"
        )
    run_ids = {(trial.region, trial.number): trial.run_id for trial in trials}
    chosen: dict[str, TrialChoice] = {}
    for value in values:
        info = summary["regions"].get(value)
        where = f" for {axis} {value!r}" if axis else ""
        if info is None or info["best"] is None:
            have = [region for region, got in summary["regions"].items() if got["best"] is not None]
            ran = 0 if info is None else info["counted"]
            why = f"none of its {plural(ran, 'trial')} there succeeded" if ran else "it ran no trial there"
            also = f"; its {axis} values with results: {', '.join(have) or 'none'}" if axis else ""
            raise SearchResultError(f"search {name!r} has no result{where} ({why}{also})")
        if info["counted"] < record.budget:
            raise SearchResultError(
                f"search {name!r} stopped before its budget{where} ({info['counted']} of {record.budget} trials): "
                f"finish it with `dagflow search run PIPELINE --name {name}`, or take what it found with "
                f"`--budget {info['counted']}` added"
            )
        best = info["best"]
        unknown = sorted(set(best["params"]) - set(spec.model.params))
        if unknown:
            known = ", ".join(spec.model.params) or "none"
            raise SearchResultError(
                f"search {name!r} trial t{best['trial']}{where} set {', '.join(map(repr, unknown))}, which "
                f"{'is not a param' if len(unknown) == 1 else 'are not params'} of {spec.filename or spec.file} "
                f"(its params: {known})"
            )
        chosen[value] = TrialChoice(best["trial"], run_ids[(value, best["trial"])], dict(best["params"]))
    return SearchedParams(name, axis, chosen)


def _axis(spec: Spec, name: str, regions: list[str]) -> str | None:
    """The pipeline's matrix axis the search ran per: the one holding its regions (the search block's `per`
    when several do); None for a search not per region."""
    if not regions:
        return None
    matrix = spec.model.matrix
    holding = [axis for axis, values in matrix.items() if set(regions) & set(values)]
    per = spec.model.search.per if spec.model.search else None
    if per in holding:
        return per
    if len(holding) == 1:
        return holding[0]
    ran = ", ".join(regions)
    if not holding:
        raise SearchResultError(f"search {name!r} ran one search per value ({ran}), and no matrix axis of "
                                f"{spec.filename or spec.file} has those values")  # fmt: skip
    raise SearchResultError(f"search {name!r} ran per value ({ran}), and several matrix axes hold them "
                            f"({', '.join(holding)}): name the one with the search block's `per:`")  # fmt: skip


def search_db(candidates: Sequence[Path], name: str) -> Path:
    """The first of the candidate databases that holds search `name` (else the first that exists, whose
    error then lists its searches); SearchResultError when none exists."""
    from dagflow.search.store import SearchStore

    existing = [path for path in dict.fromkeys(candidates) if path.is_file()]
    if not existing:
        looked = " or ".join(str(path) for path in dict.fromkeys(candidates))
        raise SearchResultError(f"no search database at {looked} (`dagflow search run` writes .dagflow/search.db "
                                "in the directory it is typed in; give --search-db)")  # fmt: skip
    for path in existing:
        store = SearchStore(path)
        try:
            if store.search(name) is not None:
                return path
        finally:
            store.close()
    return existing[0]
