"""`dagflow search --spearmint DIR` (config.json and config.pb, every variable type), `dagflow search
status` (table, --json, the convergence PNG), and bad input: a located message, exit 2, no traceback."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_search_scheduler_support import search_cli, trial_rows, write_pipeline

BRANIN_LIKE = r'''
import json
import numpy as np


def main(job_id, params):
    with open("jobs.txt", "a") as handle:
        handle.write(json.dumps({
            "job_id": job_id,
            "x": [float(v) for v in params["x"]],
            "n": [int(v) for v in params["n"]],
            "dtypes": [str(params["x"].dtype), str(params["n"].dtype)],
            "act": list(params["act"]),
        }) + "\n")
    penalty = 0.0 if params["act"][0] == "relu" else 1.0
    return float(np.sum((params["x"] - 0.25) ** 2) + 0.1 * abs(params["n"][0] - 3) + penalty)
'''

CONFIG_JSON = {
    "language": "PYTHON",
    "main-file": "objective.py",
    "experiment-name": "mixed-json",
    "likelihood": "NOISELESS",
    "variables": {
        "x": {"type": "FLOAT", "size": 2, "min": -1, "max": 1},
        "n": {"type": "INT", "size": 1, "min": 1, "max": 6},
        "act": {"type": "ENUM", "size": 1, "options": ["relu", "tanh", "sigmoid"]},
    },
}

CONFIG_PB = """language: PYTHON
name: "objective"
variable {
  name: "x"
  type: FLOAT
  size: 2
  min: -1
  max: 1
}
variable { name: "n" type: INT size: 1 min: 1 max: 6 }
variable { name: "act" type: ENUM size: 1 options: "relu" options: "tanh" options: "sigmoid" }
"""


def spearmint_dir(tmp_path: Path, config: str) -> Path:
    directory = tmp_path / f"exp-{config.split('.')[1]}"
    directory.mkdir()
    (directory / "objective.py").write_text(BRANIN_LIKE)
    text = json.dumps(CONFIG_JSON, indent=2) if config == "config.json" else CONFIG_PB
    (directory / config).write_text(text)
    return directory


def is_png(path: Path) -> tuple[int, int]:
    """The PNG's width and height, after checking the signature and that the IHDR chunk comes first."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR" and data[-8:-4] == b"IEND"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("config", ["config.json", "config.pb"])
@pytest.mark.slow
def test_spearmint_experiment_runs_the_spearmint_way(tmp_path: Path, config: str) -> None:
    directory = spearmint_dir(tmp_path, config)
    batch = config == "config.pb"  # one of the two in synchronous batches
    result = search_cli(
        "--spearmint", str(directory), "--budget", "4", "--parallel", "2", "--poll", "0.05", "--seed", "2",
        *(["--batch"] if batch else []), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert ("parallel 2 (synchronous batches)" in result.stdout) == batch
    name = "mixed-json" if config == "config.json" else directory.name
    jobs = [json.loads(line) for line in (directory / "jobs.txt").read_text().splitlines()]
    assert sorted(job["job_id"] for job in jobs) == [1, 2, 3, 4]  # job ids count from 1, each called once
    for job in jobs:  # Spearmint's types: numpy arrays of length size, ENUM as a list of strings
        assert len(job["x"]) == 2 and all(-1 <= v <= 1 for v in job["x"])
        assert 1 <= job["n"][0] <= 6 and job["act"][0] in ("relu", "tanh", "sigmoid")
        assert job["dtypes"][0].startswith("float") and job["dtypes"][1].startswith("int")
    for job_id in (1, 2, 3, 4):  # Spearmint's output files
        record = json.loads((directory / "output" / f"{job_id:08d}.json").read_text())
        assert record["status"] == "complete" and record["job_id"] == job_id
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert [row["run_id"] for row in rows] == [f"{name}-t{n}" for n in (1, 2, 3, 4)]
    assert all(row["state"] == "succeeded" for row in rows)
    if batch:  # jobs 3 and 4 were chosen after jobs 1 and 2 had both ended
        assert min(float(r["created"]) for r in rows[2:]) >= max(float(r["finished"]) for r in rows[:2])  # type: ignore[arg-type]
    by_job = {job["job_id"]: job for job in jobs}
    for row in rows:  # the recorded objective is what main returned for that job's params
        job = by_job[row["number"]]
        assert row["params"]["x"] == pytest.approx(job["x"]) and row["params"]["act"] == job["act"][0]

    status = search_cli("status", name, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "best value=" in status.stdout and "4/4 trials (4 succeeded)" in status.stdout


@pytest.mark.slow
def test_status_table_json_and_convergence_png(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=3, parallel=2, regions=["a", "b"], optimizer="random")
    (pipeline.parent / "fail-once").touch()
    assert search_cli("run", str(pipeline), "--poll", "0.05", cwd=tmp_path).returncode == 0

    result = search_cli("status", "quad", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    header = next(line for line in out.splitlines() if line.startswith("trial"))
    assert header.split() == ["trial", "region", "state", "loss", "params", "job"]
    assert out.count(" succeeded ") == 5 and out.count(" failed ") == 1
    assert "a: 3/3 trials" in out and "b: 3/3 trials" in out and "best loss=" in out
    assert "failed: evaluate" in out and "local:" in out
    png = tmp_path / ".dagflow" / "searches" / "quad-convergence.png"
    assert f"convergence plot: {Path('.dagflow/searches/quad-convergence.png')}" in out
    assert is_png(png) == (700, 450)

    as_json = json.loads(search_cli("status", "quad", "--json", "--plot", "c.png", cwd=tmp_path).stdout)
    assert as_json["search"] == "quad" and as_json["goal"] == "minimize" and as_json["metric"] == "loss"
    assert len(as_json["trials"]) == 6 and {t["state"] for t in as_json["trials"]} == {"succeeded", "failed"}
    assert all(t["engine"] == "local" and t["job"] for t in as_json["trials"])
    for region in ("a", "b"):
        info = as_json["regions"][region]
        curve = [value for _, value in info["best_so_far"] if value is not None]
        assert curve == sorted(curve, reverse=True)  # best so far never gets worse
        assert curve[-1] == info["best"]["value"]
    is_png(tmp_path / "c.png")


def _assert_clean_error(result, *fragments: str) -> None:  # type: ignore[no-untyped-def]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.slow
def test_bad_input_gives_a_located_error_and_exit_2(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p")
    text = pipeline.read_text()
    no_search = tmp_path / "p" / "no-search.yaml"
    no_search.write_text(text.split("search:")[0])
    _assert_clean_error(search_cli("run", str(no_search), cwd=tmp_path), "no-search.yaml:1:1", "no search: block")

    shared = write_pipeline(tmp_path / "q", metrics="metrics.json")
    line = next(n for n, row in enumerate(shared.read_text().splitlines(), 1) if row.startswith("    metrics:"))
    _assert_clean_error(
        search_cli("run", str(shared), cwd=tmp_path),
        f"pipeline.yaml:{line}:", "steps.evaluate.metrics", "same metrics file", "{run.id}",
    )  # fmt: skip

    bad_optimizer = tmp_path / "p" / "bad-optimizer.yaml"
    bad_optimizer.write_text(text.replace("engine: gp", "engine: simplex"))
    _assert_clean_error(search_cli("run", str(bad_optimizer), cwd=tmp_path), "search.engine", "gp, random")

    _assert_clean_error(search_cli("run", str(pipeline), "--engine", "pbs", cwd=tmp_path), "local, condor, sge, slurm")
    _assert_clean_error(search_cli("run", str(tmp_path / "missing.yaml"), cwd=tmp_path), "no such file")
    _assert_clean_error(search_cli("--spearmint", str(tmp_path / "nowhere"), cwd=tmp_path), "no such directory")
    experiment = tmp_path / "broken"
    experiment.mkdir()
    (experiment / "config.json").write_text('{"language": "PYTHON", "main-file": "m.py",\n "variables": {"x": '
                                            '{"type": "FLOAT", "min": 2, "max": 1}}}')
    _assert_clean_error(search_cli("--spearmint", str(experiment), cwd=tmp_path), "config.json:2:", "variables.x")
    _assert_clean_error(search_cli("status", "nothing", cwd=tmp_path), "no search database")


def test_the_bayes_search_example_compiles_one_trial_per_dataset() -> None:
    from dagflow.search.trials import PipelineTrials
    from dagflow.spec import load_spec

    example = Path(__file__).resolve().parent.parent / "examples" / "bayes-search" / "pipeline.yaml"
    trials = PipelineTrials(load_spec(example))
    assert trials.regions == ["wine", "breast_cancer"] and trials.metric == "val_loss"
    plan = trials.plan("wine", 4, {"C": 2.5, "gamma": 0.03}, "bayes-search-t4-wine")
    assert sorted(plan.nodes) == ["evaluate.wine", "prepare.wine", "train.wine"]
    assert plan.nodes["train.wine"].argv[4:8] == ["--C", "2.5", "--gamma", "0.03"]
    assert plan.nodes["evaluate.wine"].metrics == "out/bayes-search-t4-wine/wine/metrics.json"


@pytest.mark.parametrize(
    ("column", "bad", "message"),
    [
        ("params", "{not json", "search 'quad' trial 1: params is not valid JSON"),
        ("params", "[1, 2]", "search 'quad' trial 1: params is '[1, 2]', not a JSON dict"),
        ("config", "", "search 'quad': config is not valid JSON"),
    ],
)
def test_status_of_a_damaged_database_names_the_file_and_field(
    tmp_path: Path, column: str, bad: str, message: str
) -> None:
    import sqlite3

    from dagflow.search.store import SearchStore

    db = tmp_path / "search.db"
    store = SearchStore(db)
    store.open_search("quad", "pipeline", "p.yaml", "f", {"metric": "loss"}, 1, 3, 1)
    store.add_trial("quad", "", {"x": 0.5}, "local", 60.0)
    store.close()
    table, key = ("trials", "search") if column == "params" else ("searches", "name")
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = 'quad'", (bad,))
    result = search_cli("status", "quad", "--db", str(db), "--no-plot", cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith(f"error: {db}: {message}")


@pytest.mark.slow
def test_gpus_naming_a_missing_device_is_refused_and_no_trial_is_left_submitting(tmp_path: Path) -> None:
    import shutil

    if shutil.which("nvidia-smi") is not None:
        pytest.skip("this machine has nvidia-smi; the test needs one without GPUs")
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1)
    refused = search_cli("run", str(pipeline), "--gpus", "0", cwd=tmp_path)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "--gpus 0: no GPU 0 on this machine; GPUs here: none" in refused.stderr
    gpu_step = "    kind: evaluate\n    resources: {gpus: 1}\n"
    pipeline.write_text(pipeline.read_text().replace("    kind: evaluate\n", gpu_step))
    needs_gpu = search_cli("run", str(pipeline), "--poll", "0.05", cwd=tmp_path)
    assert needs_gpu.returncode == 2, needs_gpu.stdout + needs_gpu.stderr
    assert "Traceback" not in needs_gpu.stderr
    rows = trial_rows(tmp_path / ".dagflow" / "search.db")
    assert [row["state"] for row in rows] == ["cancelled"]
    assert str(rows[0]["error"]).startswith("could not be submitted: ")


@pytest.mark.slow
def test_the_old_engine_key_warns_once_in_search_run_as_in_validate(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1, optimizer="random")
    assert "  engine: random\n" in pipeline.read_text()  # the deprecated name of search.optimizer
    validated = subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", str(pipeline)],
        cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    warnings = [line for line in validated.stderr.splitlines() if "deprecated" in line]
    assert validated.returncode == 0 and len(warnings) == 1 and "search.engine is deprecated" in warnings[0]

    ran = search_cli("run", str(pipeline), "--poll", "0.05", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert [line for line in ran.stderr.splitlines() if "deprecated" in line] == warnings
    assert len(trial_rows(tmp_path / ".dagflow" / "search.db")) == 1

    renamed = write_pipeline(tmp_path / "q", name="renamed", budget=1, parallel=1, optimizer="random")
    renamed.write_text(renamed.read_text().replace("  engine: random", "  optimizer: random"))
    quiet = search_cli("run", str(renamed), "--poll", "0.05", cwd=tmp_path)
    assert quiet.returncode == 0, quiet.stderr
    assert "deprecated" not in quiet.stderr
