"""Spearmint experiments as their users wrote them, round 2 (issue #29): Python 2 main files and the
interpreter that runs them, Spearmint's default noise model, failures compared by cause, settings
mapped or named, NaN as infeasible, and one best everywhere. Each runs `dagflow search --spearmint`
as a real process on an experiment directory in an upstream layout (tests/data/spearmint/)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from test_search_scheduler_support import search_cli, trial_rows

from dagflow.search.spearmint_job import syntax_problem

DATA = Path(__file__).resolve().parent / "data" / "spearmint"
OTHER_PYTHON = "/usr/bin/python3"  # an interpreter other than the one running dagflow (no numpy there)


def experiment(tmp_path: Path, name: str) -> Path:
    directory = tmp_path / name
    shutil.copytree(DATA / name, directory)
    return directory


def run_search(tmp_path: Path, directory: Path, *options: str, timeout: float = 240) -> tuple[int, str, list[dict]]:
    result = search_cli(
        "--spearmint", str(directory), "--poll", "0.05", "--seed", "3", *options, cwd=tmp_path, timeout=timeout
    )
    return result.returncode, result.stdout + result.stderr, trial_rows(tmp_path / ".dagflow" / "search.db")


# -- item 1: Python 2 main files ---------------------------------------------------------------------


@pytest.mark.slow
def test_a_python2_main_file_is_named_as_such_on_the_first_failure(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "python2")
    code, output, rows = run_search(tmp_path, directory, "--budget", "10")
    assert code == 3, output
    assert [row["state"] for row in rows] == ["failed"]  # not three identical SyntaxErrors
    assert "Traceback" not in output
    assert "old.py is Python 2" in output and "print 'Evaluating at %f'" in output
    assert "2to3 -w old.py" in output and "--python" in output
    assert output.count("is Python 2") == 1


@pytest.mark.slow
@pytest.mark.skipif(not Path(OTHER_PYTHON).is_file(), reason=f"no {OTHER_PYTHON}")
def test_python_names_the_interpreter_that_runs_the_main_file(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "other-python")
    code, output, rows = run_search(tmp_path, directory, "--budget", "3", "--python", OTHER_PYTHON)
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded"] * 3
    assert (directory / "interpreters.txt").read_text().split() == [OTHER_PYTHON] * 3
    assert f"main file run by {OTHER_PYTHON}" in output


@pytest.mark.slow
@pytest.mark.parametrize("given", ["no-such-python", "config.json"])
def test_python_that_is_no_interpreter_is_refused_with_exit_2(tmp_path: Path, given: str) -> None:
    directory = experiment(tmp_path, "other-python")
    code, output, rows = run_search(tmp_path, directory, "--python", str(directory / given))
    assert code == 2, output
    assert f"--python {directory / given}: " in output and "Traceback" not in output and rows == []


@pytest.mark.parametrize(
    "source",
    [
        "print 'x'\n",
        "print x, y\n",
        "try:\n    pass\nexcept ValueError, error:\n    pass\n",
        "raise ValueError, 'bad'\n",
        "mode = 0755\n",
        "exec 'x = 1'\n",
        "if 1 <> 2:\n    pass\n",
        "s = `x`\n",
    ],
)
def test_python2_syntax_is_recognised(source: str) -> None:
    with pytest.raises(SyntaxError) as caught:
        compile(source, "/exp/branin.py", "exec")
    error = caught.value
    message = syntax_problem(error.filename or "", error.msg, error.lineno, error.text)
    assert message.startswith("branin.py is Python 2 (line ") and "2to3 -w branin.py" in message


def test_other_syntax_errors_are_not_called_python2() -> None:
    with pytest.raises(SyntaxError) as caught:
        compile("def main(job_id, params):\n    return (1\n", "/exp/branin.py", "exec")
    error = caught.value
    message = syntax_problem(error.filename or "", error.msg, error.lineno, error.text)
    assert "Python 2" not in message and message.startswith("branin.py does not compile (line ")


# -- item 3: Spearmint's default noise model ---------------------------------------------------------


@pytest.mark.slow
def test_without_a_likelihood_a_spearmint_experiment_is_modelled_as_gaussian(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "noisy")
    config = json.loads((directory / "config.json").read_text())
    del config["likelihood"]  # as most upstream experiments leave it: Spearmint then learns the noise
    (directory / "config.json").write_text(json.dumps(config, indent=4))
    code, output, rows = run_search(tmp_path, directory, "--budget", "10")
    assert code == 0, output
    lucky = int((directory / "lucky.txt").read_text())
    assert min(rows, key=lambda row: row["value"])["number"] == lucky
    line = next(line for line in output.splitlines() if " done: " in line)
    assert "lowest posterior mean" in line and f" at t{lucky} " not in line, line
    with sqlite3.connect(tmp_path / ".dagflow" / "search.db") as db:
        (config,) = db.execute("SELECT config FROM searches").fetchone()
    assert json.loads(config)["likelihood"] == "GAUSSIAN"


# -- item 5: failures compared by cause; crashed jobs as HIPS counts them -----------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("returns", "cause"),
    [("None", "the result is not a number: None"), ("{'other': 1.0}", "without the task(s) 'main'")],
)
def test_failures_with_one_cause_are_identical_whatever_the_job(tmp_path: Path, returns: str, cause: str) -> None:
    directory = experiment(tmp_path, "other-python")
    (directory / "where.py").write_text(f"def main(job_id, params):\n    return {returns}\n")
    code, output, rows = run_search(tmp_path, directory, "--budget", "6")
    assert code == 3, output
    assert [row["state"] for row in rows] == ["failed"] * 3
    assert output.count(cause) == 1 and "3 trials in a row (t1, t2, t3) failed with the same error" in output


@pytest.mark.slow
def test_crashed_jobs_do_not_count_against_the_budget(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "other-python")
    (directory / "where.py").write_text(
        "def main(job_id, params):\n"
        "    if job_id in (2, 3):\n"
        "        raise RuntimeError('the node lost its GPU')\n"
        "    return float(params['x'])\n"
    )
    code, output, rows = run_search(tmp_path, directory, "--budget", "3")
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded", "failed", "failed", "succeeded", "succeeded"]


@pytest.mark.slow
def test_a_search_whose_jobs_keep_crashing_differently_still_ends(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "other-python")
    (directory / "where.py").write_text("def main(job_id, params):\n    raise RuntimeError(f'crash {job_id}')\n")
    code, output, rows = run_search(tmp_path, directory, "--budget", "2")
    assert code == 1, output
    assert [row["state"] for row in rows] == ["failed"] * 2
    assert "2 jobs failed (as many as the budget)" in output


# -- item 4: settings mapped or named, Spearmint's flags pointed at dagflow's -------------------------


@pytest.mark.slow
def test_settings_with_an_equivalent_are_used_and_the_rest_named_once(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "settings")
    result = search_cli("--spearmint", str(directory), "--poll", "0.05", cwd=tmp_path, timeout=240)
    output = result.stdout + result.stderr
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert result.returncode == 0, output
    assert len(rows) == 3  # resources.my-machine.max-finished-jobs
    header = output.splitlines()[0]
    assert "budget 3" in header and "parallel 2" in header and "seed 7" in header, header
    named = [line for line in output.splitlines() if "not used by dagflow" in line]
    assert len(named) == 1, output
    for setting in (
        "acquisition (dagflow's gp optimiser uses expected improvement",
        "chooser",
        "database",
        "resources.scheduler",
    ):
        assert setting in named[0], named[0]
    assert "random-seed" not in named[0] and "max-concurrent" not in named[0]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("flags", "pointer"),
    [
        (["--method=GPEIOptChooser"], "--method is Spearmint's flag; use dagflow's --optimizer"),
        (["--method-args=mcmc_iters=10"], "--method-args is Spearmint's flag; use none"),
        (["--max-concurrent=2"], "use dagflow's --parallel N"),
        (["--max-finished-jobs", "40"], "use dagflow's --budget N"),
        (["--grid-size=20000"], "--grid-size is Spearmint's flag; use none: dagflow maximises"),
        (["-w"], "-w is Spearmint's flag; use dagflow search status NAME"),
    ],
)
def test_spearmints_own_flags_point_at_dagflows(tmp_path: Path, flags: list[str], pointer: str) -> None:
    directory = experiment(tmp_path, "settings")
    result = search_cli("--spearmint", str(directory), *flags, cwd=tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert pointer in output and "No such option" not in output and "Traceback" not in output
    assert trial_rows(tmp_path / ".dagflow" / "search.db") == []


@pytest.mark.slow
def test_a_bad_resource_limit_is_located(tmp_path: Path) -> None:
    directory = experiment(tmp_path, "settings")
    config = json.loads((directory / "config.json").read_text())
    config["resources"]["my-machine"]["max-concurrent"] = 0
    (directory / "config.json").write_text(json.dumps(config, indent=4))
    result = search_cli("--spearmint", str(directory), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "config.json:" in result.stderr and "max-concurrent must be a whole number >= 1" in result.stderr


# -- item 7: PESC's base config file -----------------------------------------------------------------


@pytest.mark.slow
def test_a_base_config_file_is_read_under_the_experiments_own_config(tmp_path: Path) -> None:
    """PESC's toy-fast-slow layout: each experiment's config.json names `base config file`
    ($LOCATION_OF_THIS_FILE$/../base_config.json), which holds the main file and the variables."""
    shutil.copytree(DATA / "pesc-base", tmp_path / "pesc-base")
    directory = tmp_path / "pesc-base" / "coupled"
    code, output, rows = run_search(tmp_path, directory, "--budget", "3", "--optimizer", "random")
    assert code == 0, output
    assert [row["state"] for row in rows] == ["succeeded"] * 3
    assert all(set(row["params"]) == {"x", "y"} for row in rows), rows
    assert "toy-coupled" in output  # the experiment's own name, laid over the base's settings
    named = [line for line in output.splitlines() if "not used by dagflow" in line]
    assert len(named) == 1 and "acquisition" in named[0], output  # the base's PES, named once


@pytest.mark.slow
@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ('"$LOCATION_OF_THIS_FILE$/../missing.json"', "missing.json does not exist"),
        ('"$LOCATION_OF_THIS_FILE$/config.json"', "base config files form a loop"),
        ("7", "base config file must name a config.json"),
    ],
)
def test_a_base_config_file_that_cannot_be_read_is_located(tmp_path: Path, base: str, expected: str) -> None:
    directory = tmp_path / "exp"
    directory.mkdir()
    (directory / "config.json").write_text('{\n  "experiment-name": "x",\n  "base config file": ' + base + "\n}\n")
    result = search_cli("--spearmint", str(directory), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{directory / 'config.json'}:3:" in result.stderr and expected in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_decoupled_tasks_of_a_base_config_are_refused_naming_the_base_file(tmp_path: Path) -> None:
    shutil.copytree(DATA / "pesc-decoupled", tmp_path / "pesc-decoupled")
    result = search_cli("--spearmint", str(tmp_path / "pesc-decoupled" / "coupled"), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "base_config.json:" in result.stderr and "the tasks name different main files" in result.stderr
    assert "main-file is required" not in result.stderr and "Traceback" not in result.stderr


# -- item 8: what Spearmint users look for in the experiment directory ---------------------------------

PRINTING_MAIN = """\
import sys


def main(job_id, params):
    x = float(params["x"])
    print("Anything printed here will end up in the output directory for job #%d" % job_id)
    sys.stderr.write("evaluating x=%r\\n" % x)
    return (x - 0.3) ** 2
"""


@pytest.mark.slow
def test_the_experiment_directory_holds_spearmints_own_files(tmp_path: Path) -> None:
    directory = tmp_path / "printing"
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({
        "language": "PYTHON", "main-file": "quad.py", "experiment-name": "printing", "likelihood": "NOISELESS",
        "variables": {"x": {"type": "FLOAT", "size": 1, "min": 0, "max": 1}},
    }))  # fmt: skip
    (directory / "quad.py").write_text(PRINTING_MAIN)
    code, output, rows = run_search(tmp_path, directory, "--budget", "3", "--optimizer", "random")
    assert code == 0, output
    for row in rows:
        out = (directory / "output" / f"{row['number']:08d}.out").read_text()
        assert f"output directory for job #{row['number']}" in out and "evaluating x=" in out, out
    best = min(rows, key=lambda row: row["value"])
    lines = (directory / "best_job_and_result.txt").read_text().splitlines()
    assert lines[:3] == [f"Best result: {best['value']:f}", f"Job-id: {best['number']}", "Parameters: "], lines
    assert lines[3:] == [f"x: [{best['params']['x']}]"], lines  # a size-1 variable, shown as Spearmint's array
    done = next(line for line in output.splitlines() if "search printing done" in line)
    assert f"={best['value']:.6g} at t{best['number']} " in done, done  # the same best as the summary's
    trace = [line.split(",") for line in (directory / "trace.csv").read_text().splitlines()]
    assert len(trace) == 3 and [int(line[5]) for line in trace] == [1, 2, 3], trace
    assert trace[-1][1:3] == [f"{best['value']:f}", str(best["number"])], trace
