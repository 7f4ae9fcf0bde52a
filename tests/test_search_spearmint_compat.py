"""Spearmint experiment directories in the upstream layouts (tests/data/spearmint/), run for real with
`dagflow search --spearmint DIR`: JasperSnoek's config.pb and HIPS's config.json (single task, a
constraint task, a GAUSSIAN likelihood, main-file per task), size-1 arrays used as scalars, and what is
refused (MATLAB, spearmint-lite) or stopped (every trial failing alike)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_search_scheduler_support import search_cli, trial_rows

from dagflow.search import Observation, SearchSpace
from dagflow.search.gp_ei import recommend
from dagflow.search.spearmint import load_experiment
from dagflow.spec.model import VariableSpec

DATA = Path(__file__).resolve().parent / "data" / "spearmint"


def experiment(tmp_path: Path, name: str) -> Path:
    """A fresh copy of a data directory: a search writes output/ and other files into it."""
    directory = tmp_path / name
    shutil.copytree(DATA / name, directory)
    return directory


def run_search(tmp_path: Path, directory: Path, *options: str, timeout: float = 240) -> tuple[int, str, list[dict]]:
    result = search_cli(
        "--spearmint", str(directory), "--poll", "0.05", "--seed", "3", *options, cwd=tmp_path, timeout=timeout
    )
    return result.returncode, result.stdout + result.stderr, trial_rows(tmp_path / ".dagflow" / "search.db")


def done_line(output: str) -> str:
    return next(line for line in output.splitlines() if " done: " in line)


@pytest.mark.slow
def test_config_pb_with_a_size_one_float_used_as_a_scalar(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "pb-scalar")
    code, output, rows = run_search(tmp_path, directory, "--budget", "4")
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded"] * 4
    calls = [json.loads(line) for line in (directory / "calls.txt").read_text().splitlines()]
    assert sorted(call["job_id"] for call in calls) == [1, 2, 3, 4]
    for call in calls:
        assert -2 <= call["x"] <= 2 and call["shape"] in ("round", "flat")
        assert call["twice"] == pytest.approx(2 * call["x"])


@pytest.mark.slow
def test_config_json_single_task_with_underscore_keys(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "json-single")
    loaded = load_experiment(directory)
    assert loaded.main_file == "quadratic.py" and loaded.likelihood == "NOISELESS"
    code, output, rows = run_search(tmp_path, directory, "--budget", "4", "--parallel", "2")
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded"] * 4
    assert "json-single done: best value=" in done_line(output)


@pytest.mark.slow
def test_a_spearmint_search_takes_a_serial_tail(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "json-single")
    code, output, rows = run_search(tmp_path, directory, "--budget", "4", "--parallel", "2", "--serial-tail", "2")
    assert code == 0, output
    assert "parallel 2, the last 2 one at a time" in output
    assert [row["state"] for row in rows] == ["succeeded"] * 4
    assert float(rows[2]["created"]) >= max(float(row["finished"]) for row in rows[:2])
    assert float(rows[3]["created"]) >= float(rows[2]["finished"])


@pytest.mark.slow
def test_a_constrained_search_reports_a_feasible_best(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "constrained")
    loaded = load_experiment(directory)
    assert loaded.objective_task == "distance" and loaded.constraints == {"sum_at_least_3": "NOISELESS"}
    code, output, rows = run_search(tmp_path, directory, "--budget", "12")
    assert code == 0, output
    succeeded = [row for row in rows if row["state"] == "succeeded"]
    assert len(succeeded) == 12
    outputs = [json.loads(row["outputs"]) for row in succeeded]
    assert all(set(o) == {"sum_at_least_3"} for o in outputs)
    feasible = [row for row, o in zip(succeeded, outputs, strict=True) if o["sum_at_least_3"] >= 0]
    best = min(feasible, key=lambda row: row["value"])
    assert f"at t{best['number']} " in done_line(output)
    a, b = best["params"]["a"], best["params"]["b"]
    assert a + b >= 3  # feasible, by the config's own constraint
    # the constrained optimum is 0.5 at (1.5, 1.5); the unconstrained one, 0 at (1, 1), is infeasible
    assert best["value"] < 0.8
    infeasible_lower = [row for row in succeeded if row["value"] < best["value"]]
    assert all(json.loads(row["outputs"])["sum_at_least_3"] < 0 for row in infeasible_lower)


@pytest.mark.slow
def test_a_noisy_search_reports_the_posterior_best_not_the_luckiest_draw(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "noisy")
    assert load_experiment(directory).likelihood == "GAUSSIAN"
    code, output, rows = run_search(tmp_path, directory, "--budget", "10")
    assert code == 0, output
    lowest = min(rows, key=lambda row: row["value"])
    lucky = int((directory / "lucky.txt").read_text())
    assert lowest["number"] == lucky  # the constructed lucky draw is the lowest observation...
    line = done_line(output)
    assert "lowest posterior mean" in line
    assert f" at t{lucky} " not in line  # ...and it is not what the search reports
    reported = int(line.split(" at t")[1].split()[0])
    x = next(row for row in rows if row["number"] == reported)["params"]["x"]
    assert 10 * (x - 0.3) ** 2 < 10 * (lowest["params"]["x"] - 0.3) ** 2


def test_recommend_takes_the_posterior_mean_under_a_gaussian_likelihood() -> None:
    space = SearchSpace({"x": VariableSpec(type="FLOAT", min=-1, max=1)})
    xs = np.linspace(-1, 1, 15)
    draws = xs**2 + 0.05 * np.sin(37 * xs)
    draws[-2] = -1.0  # a lucky draw far from the minimum at 0
    observations = [Observation({"x": float(x)}, float(y)) for x, y in zip(xs, draws, strict=True)]
    assert recommend(space, observations) == len(xs) - 2  # without a noise model: the lowest draw
    chosen = recommend(space, observations, "GAUSSIAN")
    assert chosen is not None and abs(xs[chosen]) < 0.3
    infeasible = [Observation(o.params, o.value, {"c": -1.0}) for o in observations]
    assert recommend(space, infeasible, "GAUSSIAN") is None


@pytest.mark.slow
def test_main_file_given_per_task(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "per-task-main")
    loaded = load_experiment(directory)
    assert loaded.main_file == "loss.py" and loaded.objective_task == "loss"
    code, output, rows = run_search(tmp_path, directory, "--budget", "3")
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded"] * 3


@pytest.mark.slow
def test_tasks_naming_different_main_files_are_refused(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "per-task-main")
    config = json.loads((directory / "config.json").read_text())
    config["tasks"]["c"] = {"type": "CONSTRAINT", "main-file": "other.py"}
    (directory / "config.json").write_text(json.dumps(config, indent=2))
    code, output, rows = run_search(tmp_path, directory, "--budget", "3")
    assert code == 2 and "Traceback" not in output
    assert "config.json:" in output and "different main files" in output and rows == []


@pytest.mark.parametrize(
    ("name", "message"),
    [("matlab", "a MATLAB experiment cannot be run"), ("lite", "spearmint-lite config")],
)
@pytest.mark.slow
def test_what_dagflow_cannot_run_is_refused_with_exit_2(tmp_path: Path, name: str, message: str) -> None:
    directory = experiment(tmp_path, name)
    code, output, rows = run_search(tmp_path, directory, "--budget", "3")
    assert code == 2, output
    assert message in output and "config.json" in output and "Traceback" not in output
    assert rows == [] and not (directory / "output").exists()


@pytest.mark.slow
def test_identical_failures_stop_the_search(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "python2")
    # (a Python 2 main file stops the search at its first failure: test_search_spearmint_round2.py)
    (directory / "old.py").write_text("def main(job_id, params):\n    raise ImportError('No module named cudamat')\n")
    code, output, rows = run_search(tmp_path, directory, "--budget", "10", "--max-identical-failures", "2")
    assert code == 3, output
    assert [row["state"] for row in rows] == ["failed", "failed"]  # the other 8 of the budget are not spent
    assert output.count("ImportError: No module named cudamat") == 1  # the error text, once
    assert "the same error as t1" in output and "2 trials in a row (t1, t2) failed with the same error" in output
    assert "old.py" in rows[0]["error"]  # the job's own traceback, recorded with the trial


@pytest.mark.slow
def test_different_failures_do_not_stop_the_search(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "python2")
    (directory / "old.py").write_text(
        "def main(job_id, params):\n    raise ValueError(f'job {job_id} fails its own way')\n"
    )
    code, output, rows = run_search(tmp_path, directory, "--budget", "3", "--max-identical-failures", "2")
    assert code == 1, output  # no trial succeeded, but every one ran
    assert [row["state"] for row in rows] == ["failed"] * 3
