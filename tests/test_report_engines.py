"""`dagflow report` on runs of the batch engines (a real Slurm and Grid Engine cluster, the HTCondor pool):
the same page from each, read through the engine that made the run."""

from __future__ import annotations

import subprocess
import sys
from html import escape
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.report.timeline import place_name
from dagflow.run.usage import read_usage

SMALL = """name: small
matrix:
  region: [us, de]
steps:
  work:
    command: [python, -c, "import json; block = bytearray(40_000_000); json.dump({{'loss': 0.5, 'region': '{region}'}}, open('m-{region}.json', 'w'))"]
    metrics: m-{region}.json
    outputs:
      - m-{region}.json
    resources: {memory: 2GB}
  check:
    command: [python, -c, "import json; assert json.load(open('m-{region}.json'))['loss'] == 0.5"]
    needs: [work]
    inputs:
      - m-{region}.json
  gather:
    command: [python, -c, "print('done')"]
    needs: [check]
    over: [region]
"""  # noqa: E501
NODES = ("work.us", "work.de", "check.us", "check.de", "gather")
TIMEOUT_S = 900  # a batch run on a loaded machine; only here to stop a hang


def dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True,
        timeout=TIMEOUT_S,
    )  # fmt: skip


def check_report(html: str, run_dir: Path, engine: str) -> None:
    assert f"engine {engine} · <b>succeeded</b> · 5 nodes (5 succeeded)" in html
    for name in NODES:
        assert f"<td>{name}</td>" in html and f">{name}</text>" in html
        assert f"{name} (attempt " in html  # a bar on the timeline
    assert html.count('data-v="0.5"') == 2  # each region's loss, from its metrics file
    records = read_usage(run_dir)
    if records:  # what the engine measured: counted, and its machines named on the timeline
        assert f"{len(records)} measured attempts" in html
        for record in records:
            assert escape(place_name(record.host, record.slot)) in html
    else:
        assert "No usage records in this run" in html


@pytest.mark.parametrize("engine", ["slurm", "sge"])
@pytest.mark.slow
def test_batch_engine_runs_report_alike(tmp_path: Path, engine: str, request: pytest.FixtureRequest) -> None:
    request.getfixturevalue({"slurm": "slurm_cluster", "sge": "sge_cluster"}[engine])
    (tmp_path / "pipeline.yaml").write_text(SMALL)
    ran = dagflow("run", "--engine", engine, "pipeline.yaml", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = dagflow("report", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.strip())
    check_report(page.read_text(encoding="utf-8"), page.parent, engine)


@pytest.mark.condor_pool
def test_condor_run_reports_alike(condor_pool) -> None:  # type: ignore[no-untyped-def]
    workdir = condor_pool.workdir("report-small")
    (workdir / "pipeline.yaml").write_text(SMALL)
    condor_pool.give(workdir)
    run = ["run", "--engine", "condor", "pipeline.yaml"]
    ran = condor_pool.dagflow(run, cwd=workdir, check=False, timeout=TIMEOUT_S)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    made = condor_pool.dagflow(["report"], cwd=workdir, check=False)
    assert made.returncode == 0, made.stderr
    page = Path(made.stdout.strip())
    check_report(page.read_text(encoding="utf-8"), page.parent, "condor")
