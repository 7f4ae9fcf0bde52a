"""The convergence PNG of `dagflow search status --plot` reads losses on a log axis (#29 item 9).

A minimised objective whose values are all positive (a loss, a regret) spans decades as a search
converges: on a linear axis everything after the first few trials is a flat line at the bottom. Values
at or below zero, and maximised metrics (accuracy: near its top, not decades apart), stay linear.
The PNG is written for real; the axes are read from the figure as it is closed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest

from dagflow.search.report import plot_convergence


def summary(values: list[float], goal: str = "minimize") -> dict[str, Any]:
    """A search's summary (summarise()'s shape) with one successful trial per value."""
    best: list[list[float | None]] = []
    for number, value in enumerate(values, start=1):
        previous = best[-1][1] if best else None
        better = min if goal == "minimize" else max
        best.append([number, value if previous is None else better(previous, value)])
    return {
        "search": "s",
        "metric": "val_loss",
        "goal": goal,
        "regions": {"": {"best_so_far": best}},
        "trials": [
            {"trial": number, "region": None, "state": "succeeded", "value": value}
            for number, value in enumerate(values, start=1)
        ],
    }


def y_scale_of_plot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: dict[str, Any]) -> str:
    """Plot `data` to a PNG; the y axis scale of the figure it drew."""
    scales: list[str] = []
    close = plt.close

    def record_then_close(figure: Any = None) -> None:
        scales.append(figure.axes[0].get_yscale())
        close(figure)

    monkeypatch.setattr(plt, "close", record_then_close)
    path = plot_convergence(data, tmp_path / "convergence.png")
    assert path.read_bytes().startswith(b"\x89PNG")
    return scales[0]


def test_a_positive_loss_is_plotted_on_a_log_axis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert y_scale_of_plot(tmp_path, monkeypatch, summary([3.2, 0.5, 0.04, 2e-3, 1e-4])) == "log"


@pytest.mark.parametrize(
    ("values", "goal"),
    [([-1.0, -2.5, -3.3], "minimize"), ([0.0, 0.5, 0.2], "minimize"), ([0.71, 0.84, 0.9], "maximize")],
    ids=["negative", "a-zero", "maximised"],
)
def test_other_series_stay_linear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, values: list[float], goal: str
) -> None:
    assert y_scale_of_plot(tmp_path, monkeypatch, summary(values, goal)) == "linear"
