"""`dagflow compile` on real pipeline files, through the lead's loader and expand."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.lint import lint_dag, parse_dag
from tests.condor_helpers import argv_of, job_ad, machine_ad, node_submit, write

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "region-retrain" / "pipeline.yaml"

GPU_PIPELINE = """\
name: gpu-demo
matrix:
  region: [us, br]
  trial: ["0", "1"]
params: {lr: 0.01}
steps:
  fetch:
    kind: transfer
    from: s3://ratings/{region}/
    to: data/{region}/
  train:
    kind: train
    needs: [fetch]
    command: ["python", "train.py", "--lr", "{params.lr}", "--note", "$(ENV(HOME)) # \\\\ \\" ' ✓"]
    resources: {gpus: 1, gpu_memory: 16GB, cuda_capability: 8.0, memory: 8GB, cpus: 4}
    requirements: 'Machine != "bad.example.org"'
    classads: {DagflowTeam: recs}
    retries: {count: 2, unless_exit: [3]}
    timeout: 2h
  report:
    kind: evaluate
    needs: [train]
    over: [region]
    command: python report.py
"""


def test_compile_the_example_and_lint_it(tmp_path: Path) -> None:
    out = tmp_path / "condor"
    result = CliRunner().invoke(app, ["compile", str(EXAMPLE), "-o", str(out), "--run-id", "r1",
                                      "--data-mode", "shared"])
    assert result.exit_code == 0, result.output
    dag_path = out / "region-retrain.dag"
    assert lint_dag(dag_path) == []
    dag = parse_dag(dag_path)
    submit = node_submit(dag, "train.us")
    assert argv_of(submit)[:2] == ["python", "train.py"]
    assert submit.expand("initialdir") == str(EXAMPLE.parent)
    assert dag.retries["train.us"] == (1, 2)
    assert job_ad(submit).eval("DagflowRunId") == "r1"


def test_compile_a_gpu_matrix_pipeline(tmp_path: Path) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", GPU_PIPELINE)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["compile", str(pipeline), "-o", str(out), "--max-gpu-jobs", "3"])
    assert result.exit_code == 0, result.output
    dag_path = out / "gpu-demo.dag"
    assert lint_dag(dag_path) == []
    assert "MAXJOBS gpu 3" in dag_path.read_text().splitlines()
    dag = parse_dag(dag_path)
    submit = node_submit(dag, "train.br.1")
    assert argv_of(submit)[-1] == "$(ENV(HOME)) # \\ \" ' ✓"
    job = job_ad(submit)
    assert job.eval("DagflowRegion") == "br"
    assert job.eval("DagflowTrial") == "1"
    assert job.eval("DagflowTeam") == "recs"
    assert job.symmetricMatch(machine_ad())
    assert not job.symmetricMatch(machine_ad(Machine="bad.example.org"))
    assert not job.symmetricMatch(machine_ad(GPUs_GlobalMemoryMb=12000))
    report = node_submit(dag, "report.0")
    assert job_ad(report).eval("DagflowTrial") == "0"
    assert {p for p, c, _ in dag.edges if c == "report.0"} == {"train.us.0", "train.br.0"}


def test_compile_reports_an_invalid_pipeline_with_exit_2(tmp_path: Path) -> None:
    pipeline = write(tmp_path / "pipeline.yaml", "name: x\nsteps:\n  a: {kind: train}\n")
    result = CliRunner().invoke(app, ["compile", str(pipeline), "-o", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "pipeline.yaml:" in result.output


def test_compile_default_output_dir(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["compile", str(EXAMPLE), "--run-id", "abc"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / ".dagflow" / "runs" / "abc" / "condor" / "region-retrain.dag").is_file()


def test_dagflow_submit_points_compile_at_edited_templates(tmp_path: Path) -> None:
    """DAGFLOW_SUBMIT_TEMPLATES (documented in the README) replaces the shipped submit/."""
    import os
    import shutil
    import subprocess
    import sys

    from dagflow.engines.condor.templates import template_dir

    edited = tmp_path / "my-submit"
    shutil.copytree(template_dir(), edited)
    train = edited / "train.sub"
    train.write_text(train.read_text().replace("queue", "accounting_group = site.ml\nqueue"))
    pipeline = Path(__file__).parent / "data" / "design_sketch.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "dagflow", "compile", str(pipeline), "-o", str(tmp_path / "out"), "--run-id", "r1"],
        env={**os.environ, "DAGFLOW_SUBMIT_TEMPLATES": str(edited)}, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "accounting_group = site.ml" in (tmp_path / "out" / "train.sub").read_text()
    assert "accounting_group" not in (tmp_path / "out" / "evaluate.sub").read_text()
