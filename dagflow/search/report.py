"""`dagflow search status`: a search's trials table, its best trial per region, and a convergence plot
(best-so-far objective against trial number, one line per region) as a PNG.

The best is best.reported_best's, as the scheduler's last line and `dagflow report --search` have it:
feasible only, and under GAUSSIAN the lowest posterior mean, shown with its observed value. With
constraints, or once a trial's objective was NaN (HIPS Spearmint's infeasible point), each trial shows
whether it is feasible; the best-so-far curve counts feasible trials only, and the plot marks the best."""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

from dagflow.files import write_atomic
from dagflow.palette import region_colours
from dagflow.search.best import best_info, best_text, reported_best, space_of
from dagflow.search.scheduler import params_text
from dagflow.search.store import (
    CANCELLED,
    COUNTED,
    FAILED,
    IN_FLIGHT,
    STOPPED,
    SUCCEEDED,
    SearchRecord,
    Trial,
    feasible,
    nan_objective,
)
from dagflow.text import inert


def summarise(record: SearchRecord, trials: list[Trial]) -> dict[str, Any]:
    """Everything `search status` shows, as plain data (the --json output)."""
    goal = record.config.get("goal", "minimize")
    order = {region: index for index, region in enumerate(record.config.get("regions") or [""])}
    trials = sorted(trials, key=lambda t: (order.get(t.region, len(order)), t.region, t.number))
    likelihood = record.config.get("likelihood")
    space = space_of(record.config) if likelihood == "GAUSSIAN" else None
    constrained = bool(record.config.get("constraints")) or any(nan_objective(trial) for trial in trials)
    regions: dict[str, dict[str, Any]] = {}
    for region in order:
        mine = [trial for trial in trials if trial.region == region]
        best = reported_best(mine, likelihood, space, goal)
        states: dict[str, int] = {}
        for trial in mine:
            states[trial.state] = states.get(trial.state, 0) + 1
        regions[region] = {
            "counted": sum(1 for trial in mine if trial.state in COUNTED),
            "in_flight": sum(1 for trial in mine if trial.state in IN_FLIGHT),
            "states": states,
            "best": best_info(best),
            "best_so_far": best_so_far(mine, goal),
        }
    return {
        "search": record.name,
        "kind": record.kind,
        "source": record.source,
        "metric": record.config.get("metric"),
        "goal": goal,
        "optimizer": record.config.get("optimizer"),
        "budget": record.budget,
        "parallel": record.parallel,
        "seed": record.seed,
        "likelihood": likelihood,
        "constrained": constrained,  # the trials show whether each is feasible
        "regions": regions,
        "trials": [
            {
                "trial": trial.number,
                "region": trial.region or None,
                "params": trial.params,
                "state": trial.state,
                "value": trial.value,
                **({"feasible": _feasibility(trial), "outputs": trial.outputs} if constrained else {}),
                "engine": trial.engine,
                "run_id": trial.run_id,
                "job": trial.handle,
                # the store keeps one text per ended trial: an error for a failed one, and for a trial
                # stopped early or cancelled, why it was stopped
                "error": trial.error if trial.state == FAILED else None,
                "stopped_because": None if trial.state == FAILED else trial.error,
                "step": trial.step,
                "created": trial.created,
                "finished": trial.finished,
            }
            for trial in trials
        ],
    }


def _feasibility(trial: Trial) -> str | None:
    """A trial's feasibility as the status table shows it: "yes", "no", "nan" (a NaN objective), or None
    (no result: in flight, failed, cancelled)."""
    if nan_objective(trial):
        return "nan"
    if trial.state not in (SUCCEEDED, STOPPED) or trial.value is None:
        return None
    return "yes" if feasible(trial) else "no"


def best_so_far(trials: list[Trial], goal: str) -> list[list[float | None]]:
    """[trial number, best value among the feasible trials 1..number] for each ended trial, in trial order
    (None while none is feasible): an infeasible trial's value is no result of the search."""
    points: list[list[float | None]] = []
    best: float | None = None
    better = min if goal == "minimize" else max
    for trial in sorted(trials, key=lambda t: t.number):
        if trial.state in IN_FLIGHT or trial.state == CANCELLED:
            continue
        if trial.state == SUCCEEDED and trial.value is not None and math.isfinite(trial.value) and feasible(trial):
            best = trial.value if best is None else better(best, trial.value)
        points.append([trial.number, best])
    return points


def render_table(summary: dict[str, Any]) -> str:
    per_region = any(trial["region"] for trial in summary["trials"])
    constrained = bool(summary.get("constrained"))
    header = [
        "trial", *(["region"] if per_region else []), "state", summary["metric"] or "value",
        *(["feasible"] if constrained else []), "params", "job",
    ]  # fmt: skip
    rows = [header]
    for trial in summary["trials"]:
        value = "" if trial["value"] is None else f"{trial['value']:.6g}"
        value = "nan" if trial.get("feasible") == "nan" else value
        job = f"{trial['engine']}:{trial['job']}" if trial["job"] else trial["engine"]
        region = [trial["region"] or ""] if per_region else []
        feasibility = [trial.get("feasible") or ""] if constrained else []
        rows.append(
            [f"t{trial['trial']}", *region, trial["state"], value, *feasibility, params_text(trial["params"]), job]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [
        f"search {summary['search']} ({summary['kind']} {summary['source']}): {summary['goal']} {summary['metric']}, "
        f"budget {summary['budget']}{' per region' if per_region else ''}, parallel {summary['parallel']}, "
        f"optimiser {summary['optimizer']}",
        "",
    ]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.append("")
    for region, info in summary["regions"].items():
        where = f"{region}: " if region else ""
        states = ", ".join(f"{count} {state}" for state, count in sorted(info["states"].items())) or "no trials"
        lines.append(f"{where}{info['counted']}/{summary['budget']} trials ({states}); {best_line(summary, info)}")
    failed = [trial for trial in summary["trials"] if trial["state"] == FAILED and trial["error"]]
    for trial in failed[-5:]:
        region = f" {trial['region']}" if trial["region"] else ""
        lines.append(f"  t{trial['trial']}{region} failed: {inert(trial['error'].splitlines()[0])}")
    return "\n".join(lines)


def best_line(summary: dict[str, Any], info: dict[str, Any]) -> str:
    """A region's best as `search status` and `dagflow report --search` say it."""
    best = info["best"]
    if not best:
        return "no feasible trial yet" if summary.get("constrained") else "no successful trial yet"
    shown = best_text(summary["metric"], best["value"], best["trial"], best.get("posterior_mean"))
    how = "; lowest posterior mean: the objective is noisy" if "posterior_mean" in best else ""
    return f"best {shown} ({params_text(best['params'])}{how})"


def plotted_values(summary: dict[str, Any]) -> list[float]:
    """Every value the convergence plot draws: the best-so-far curves and the successful trials."""
    curves = [y for info in summary["regions"].values() for _, y in info["best_so_far"] if y is not None]
    dots = [t["value"] for t in summary["trials"] if t["state"] == SUCCEEDED and t["value"] is not None]
    return [float(value) for value in (*curves, *dots) if math.isfinite(value)]


def convergence_scale(summary: dict[str, Any]) -> str:
    """The y axis of the convergence plot: "log" for a minimised objective whose values are all positive
    (a loss or a regret: it shrinks by decades as the search converges, which a linear axis flattens into
    the bottom line), else "linear" (a value at or below zero has no log; a maximised metric, such as an
    accuracy, approaches its top, not zero; symlog would bend the axis near zero for no reader's gain)."""
    values = plotted_values(summary)
    if summary["goal"] == "minimize" and values and min(values) > 0:
        return "log"
    return "linear"


def plot_convergence(summary: dict[str, Any], path: Path) -> Path:
    """Best-so-far (feasible trials only) against trial number per region, with every successful trial as a
    dot (hollow where it is infeasible) and the region's best (best.py) as a star; the y axis as
    convergence_scale says."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display, no GUI toolkit
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    colours = region_colours(summary)
    figure, axes = plt.subplots(figsize=(7, 4.5), dpi=100)
    try:
        for region, info in summary["regions"].items():
            label = region or summary["search"]
            curve = [(x, y) for x, y in info["best_so_far"] if y is not None]
            if curve:
                xs, ys = zip(*curve, strict=True)
                axes.step(xs, ys, where="post", label=f"{label} best so far", color=colours[region])
                mine = [
                    t
                    for t in summary["trials"]
                    if (t["region"] or "") == region and t["state"] == SUCCEEDED and t["value"] is not None
                ]
                for ok in (True, False):
                    dots = [(t["trial"], t["value"]) for t in mine if (t.get("feasible") in (None, "yes")) == ok]
                    if dots:
                        face = colours[region] if ok else "none"
                        axes.scatter(
                            *zip(*dots, strict=True), s=12, alpha=0.5, facecolors=face, edgecolors=colours[region],
                            label=None if ok else f"{label} infeasible",
                        )  # fmt: skip
            best = info.get("best")
            if best and best["value"] is not None:
                axes.scatter([best["trial"]], [best["value"]], s=90, marker="*", color=colours[region], zorder=3,
                             label=f"{label} best (t{best['trial']})")  # fmt: skip
        axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_yscale(convergence_scale(summary))
        axes.set_xlabel("trial")
        axes.set_ylabel(f"{summary['metric']} ({summary['goal']})")
        axes.set_title(f"search {summary['search']}: convergence")
        axes.grid(True, alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend()
        png = io.BytesIO()
        figure.savefig(png, format="png")
        write_atomic(path, png.getvalue())
    finally:
        plt.close(figure)
    return path
