"""HTCondor's condor_dag_checker as the judge: it agrees with dagflow's parser on the DAG fixtures in
tests/data/dags/, `dagflow lint` reports its findings, and every DAG dagflow compiles passes it.

Where ../shared/htcondor has the release, it is unpacked for these tests (tests/condor_pool.py) whether or not
a pool test ran first; skipped only where neither PATH nor a release has condor_dag_checker."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.condor.lint import CHECKER, CHECKER_OPTIONS, lint_dag
from tests.condor_helpers import regional_plan
from tests.condor_pool import dag_checker, state_dir
from tests.test_condor_escape import HOSTILE

ROOT = Path(__file__).resolve().parents[1]
DAGS = ROOT / "tests" / "data" / "dags"
VALID = sorted((DAGS / "valid").glob("*.dag"))
INVALID = sorted((DAGS / "invalid").glob("*.dag"))
PIPELINES = [*sorted((ROOT / "examples").glob("*/pipeline.yaml")), ROOT / "tests" / "data" / "design_sketch.yaml"]
# Every hostile value the escaping tests use that a pipeline may carry (line breaks are refused earlier).
HOSTILE_ARGV = ["python", "train.py", *HOSTILE]


@pytest.fixture(scope="module")
def checker() -> Path:
    found = dag_checker()
    if found is None:
        pytest.skip(f"{CHECKER} is neither on PATH nor in an unpacked HTCondor release ({state_dir()}/release)")
    return found


def run_checker(checker: Path, dag: Path) -> subprocess.CompletedProcess[str]:
    """The checker as `dagflow lint` runs it, minus -json, so failures print readably."""
    env = dict(os.environ)
    config = state_dir() / "condor_config"
    env.setdefault("CONDOR_CONFIG", str(config) if config.is_file() else "ONLY_ENV")
    options = [option for option in CHECKER_OPTIONS if option != "-json"]
    return subprocess.run([str(checker), *options, str(dag)], capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize("dag", VALID, ids=lambda path: path.stem)
def test_checker_accepts_the_valid_fixtures(checker: Path, dag: Path) -> None:
    done = run_checker(checker, dag)
    assert done.returncode == 0, done.stdout + done.stderr
    assert lint_dag(dag, checker) == []
    assert lint_dag(dag) == []


@pytest.mark.parametrize("dag", INVALID, ids=lambda path: path.stem)
def test_checker_rejects_the_invalid_fixtures(checker: Path, dag: Path) -> None:
    assert run_checker(checker, dag).returncode != 0
    assert [p for p in lint_dag(dag, checker) if p.severity == "error"]
    assert [p for p in lint_dag(dag) if p.severity == "error"]


def test_lint_reports_the_checkers_findings_with_exit_2(checker: Path) -> None:
    dag = DAGS / "invalid" / "illegal_node_name.dag"
    result = CliRunner().invoke(app, ["lint", str(dag), "--dag-checker", str(checker)])
    assert result.exit_code == 2
    assert f"{dag}:2: error: JOB: Node name contains illegal" in result.output
    result = CliRunner().invoke(app, ["lint", str(DAGS / "valid"), "--dag-checker", str(checker)])
    assert result.exit_code == 0, result.output
    assert f"checked by {checker}" in result.output


def test_lint_keeps_dagflows_own_checks_beside_the_checker(checker: Path, tmp_path: Path) -> None:
    (tmp_path / "x.dag").write_text("JOB a missing.sub\n", encoding="utf-8")
    [problem] = lint_dag(tmp_path / "x.dag", checker)
    assert problem.line == 1 and "does not exist" in problem.message


def test_a_missing_checker_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lint", str(DAGS / "valid"), "--dag-checker", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "does not exist" in result.output


def _assert_passes(checker: Path, dag: Path) -> None:
    done = run_checker(checker, dag)
    assert done.returncode == 0, done.stdout + done.stderr
    assert lint_dag(dag, checker) == []


def _pipeline_id(path: Path) -> str:
    return path.parent.name if path.name == "pipeline.yaml" else path.stem


@pytest.mark.parametrize("pipeline", PIPELINES, ids=_pipeline_id)
def test_every_compiled_pipeline_passes_the_checker(checker: Path, pipeline: Path, tmp_path: Path) -> None:
    out = tmp_path / "condor"
    result = CliRunner().invoke(app, ["compile", str(pipeline), "-o", str(out), "--run-id", "r1"])
    assert result.exit_code == 0, result.output
    [dag] = out.glob("*.dag")
    _assert_passes(checker, dag)


def test_a_plan_with_hostile_values_passes_the_checker(checker: Path, tmp_path: Path) -> None:
    plan = regional_plan(
        regions=("us", "br"),
        train_argv=HOSTILE_ARGV,
        train_env={f"HOSTILE_{index}": value for index, value in enumerate(HOSTILE) if ";" not in value},
        workdir=str(tmp_path),
    )
    _assert_passes(checker, compile_plan(plan, tmp_path / "condor"))
