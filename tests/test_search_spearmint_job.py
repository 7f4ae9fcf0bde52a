"""The Spearmint job runner, run as a real process on a real main file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONFIG = {
    "language": "PYTHON",
    "main-file": "experiment.py",
    "experiment-name": "runner-test",
    "variables": {
        "x": {"type": "FLOAT", "size": 2, "min": -1, "max": 1},
        "k": {"type": "INT", "size": 1, "min": 1, "max": 5},
        "act": {"type": "ENUM", "size": 2, "options": ["relu", "tanh"]},
    },
}

# The main file records what it was called with, then behaves as params["act"][0] and k ask.
MAIN = '''
import json
import os

import numpy as np
import helper  # a sibling module: the experiment directory is on sys.path


def main(job_id, params):
    seen = {
        "job_id": job_id,
        "cwd": os.getcwd(),
        "types": {name: "ndarray" if isinstance(value, np.ndarray) else type(value).__name__
                  for name, value in params.items()},
        "scalars": [float(params["x"][:1]), int(params["k"]), list(range(params["k"])), "%.2f" % params["k"]],
        "dtypes": {name: str(value.dtype) for name, value in params.items() if isinstance(value, np.ndarray)},
        "lengths": {name: len(value) for name, value in params.items()},
        "act": params["act"],
    }
    with open(f"seen-{job_id}.json", "w") as handle:
        json.dump(seen, handle)
    mode = params["k"][0]
    value = helper.value(params["x"])
    if mode == 1:
        return value
    if mode == 2:
        return {"main": value, "extra": 7}
    if mode == 3:
        return float("nan")
    if mode == 4:
        raise RuntimeError("training diverged")
    return {"other": 1.0}
'''


@pytest.fixture()
def experiment(tmp_path: Path) -> Path:
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "experiment.py").write_text(MAIN)
    (tmp_path / "helper.py").write_text("def value(x):\n    return float((x ** 2).sum())\n")
    return tmp_path


def run(directory: Path, job_id: int, params: dict) -> tuple[subprocess.CompletedProcess[str], dict | None]:
    process = subprocess.run(
        [sys.executable, "-m", "dagflow.search.spearmint_job", "--dir", str(directory), "--job-id", str(job_id),
         "--params", json.dumps(params)],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], timeout=60,
    )
    result = directory / "output" / f"{job_id:08d}.json"
    return process, json.loads(result.read_text()) if result.exists() else None


def params(k: int) -> dict:
    return {"x": [0.5, -0.5], "k": k, "act": ["tanh", "relu"]}


def test_float_result_and_the_calling_convention(experiment: Path) -> None:
    process, result = run(experiment, 1, params(1))
    assert process.returncode == 0, process.stderr
    assert result is not None
    assert result["status"] == "complete" and result["value"] == pytest.approx(0.5)
    assert result["job_id"] == 1 and result["error"] is None
    seen = json.loads((experiment / "seen-1.json").read_text())
    assert seen["job_id"] == 1
    assert Path(seen["cwd"]).resolve() == experiment.resolve()
    assert seen["types"] == {"x": "ndarray", "k": "ndarray", "act": "list"}
    assert seen["dtypes"]["x"] == "float64" and seen["dtypes"]["k"].startswith("int")
    assert seen["lengths"] == {"x": 2, "k": 1, "act": 2}
    assert seen["act"] == ["tanh", "relu"]
    # size-1 arrays also work as scalars, as they did under the numpy of Spearmint's time
    assert seen["scalars"] == [0.5, 1, [0], "1.00"]


def test_dict_result_takes_the_main_task(experiment: Path) -> None:
    process, result = run(experiment, 2, params(2))
    assert process.returncode == 0, process.stderr
    assert result is not None
    assert result["value"] == pytest.approx(0.5)
    assert result["values"] == {"main": pytest.approx(0.5), "extra": 7.0}


def test_a_nan_objective_completes_the_job_as_infeasible(experiment: Path) -> None:
    """HIPS Spearmint's semantics (#29 item 2): NaN marks the point infeasible; the job is not broken."""
    process, result = run(experiment, 3, params(3))
    assert process.returncode == 0, process.stderr
    assert result is not None and result["status"] == "complete" and result["infeasible"] is True
    assert result["value"] == "nan" and result["error"] is None


@pytest.mark.parametrize(("k", "error"), [(4, "RuntimeError: training diverged"), (5, "without the task(s) 'main'")])
def test_exceptions_and_missing_objectives_break_the_job(experiment: Path, k: int, error: str) -> None:
    process, result = run(experiment, 3, params(k))
    assert process.returncode == 1
    assert result is not None
    assert result["status"] == "broken" and result["value"] is None
    assert error in result["error"]


@pytest.mark.slow
def test_bad_calls_exit_2_without_a_result(experiment: Path) -> None:
    process, result = run(experiment, 0, params(1))
    assert process.returncode == 2 and "counts from 1" in process.stderr
    process, result = run(experiment, 4, {"x": [0.1], "k": 1, "act": ["relu", "relu"]})
    assert process.returncode == 2 and "expected 2 value(s)" in process.stderr and result is None
    process, result = run(experiment, 5, {**params(1), "act": ["swish", "relu"]})
    assert process.returncode == 2 and "'swish' is not one of" in process.stderr
