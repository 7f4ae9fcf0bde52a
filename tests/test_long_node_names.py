"""A node name no file name can hold (250+ characters of matrix values) runs on every engine (issue #42 item 6).

The hypothesis test of job-script values found it: a ~250-character node name from matrix values gave
`OSError: File name too long` for the Slurm job script, a traceback. A matrix value is at most 64
characters, but a node's name joins one value per axis: four axes make 265 characters. Every place a node name becomes a
file name (the local keeper's logs, the batch wrapper's logs and job scripts, HTCondor's `output`/`error`,
promotion verdicts) goes through `dagflow.files.file_stem`: the name itself when it fits, else cut and
given a hash of the whole name.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from test_local_support import dagflow_cli

from dagflow.engines.batch.units import plan_units
from dagflow.engines.condor.compile import compile_plan
from dagflow.engines.sge import commands as sge_commands
from dagflow.engines.sge.submit import Submission as SgeSubmission
from dagflow.engines.sge.submit import sge_units
from dagflow.engines.slurm import commands as slurm_commands
from dagflow.engines.slurm.submit import Submission as SlurmSubmission
from dagflow.files import MAX_STEM_BYTES, file_stem
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.run.layout import RunLayout
from dagflow.run.promotions import Verdict, read_verdict, write_verdict
from dagflow.spec import load_spec

VALUE = "v" * 64  # the longest matrix value
LONG = ".".join([VALUE] * 4)  # a node's coordinates: hello.<LONG> is 265 characters
PIPELINE = f"""\
name: long
matrix: {{a: [{VALUE}, {VALUE[:-1]}w, us], b: [{VALUE}], c: [{VALUE}], d: [{VALUE}]}}
steps:
  hello:
    command: echo hi {{a}}
"""
OTHER = LONG.replace(VALUE, VALUE[:-1] + "w", 1)


def _plan(tmp_path: Path) -> Plan:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    return expand(load_spec(tmp_path / "pipeline.yaml"), run_id="r1")


def test_file_stem_keeps_short_names_and_cuts_long_ones_apart() -> None:
    assert file_stem("train.us") == "train.us"
    long, longer = file_stem("hello." + LONG), file_stem("hello." + OTHER)
    assert long != longer and len(long.encode()) <= MAX_STEM_BYTES and long.startswith("hello.vvv")
    assert file_stem("a/b") != "a/b" and "/" not in file_stem("a/b") and file_stem("..") != ".."


def test_a_local_run_of_a_long_node_name_succeeds_and_logs(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE)
    result = dagflow_cli("run", "pipeline.yaml", "--jobs", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    logs = dagflow_cli("logs", "latest", f"hello.{LONG}", cwd=tmp_path)
    assert logs.returncode == 0 and logs.stdout == f"hi {VALUE}\n", logs.stderr
    other = dagflow_cli("logs", "latest", f"hello.{OTHER}", cwd=tmp_path)
    assert other.stdout == f"hi {VALUE[:-1]}w\n"


@pytest.mark.parametrize("engine", ["slurm", "sge"])
def test_batch_job_scripts_of_long_node_names_are_written(engine: str, tmp_path: Path) -> None:
    """One job per node (a retry of one node, or arrays=False): each script is named by its node."""
    plan = _plan(tmp_path)
    run_dir = tmp_path / "run"
    (run_dir / engine / "scripts").mkdir(parents=True)
    submitted: list[str] = []

    def fake_submit(options: list[str], path: str) -> str:
        assert Path(path).is_file()
        submitted.append(path)
        return str(10 + len(submitted))

    nodes = list(plan.nodes)
    if engine == "slurm":
        with mock.patch.object(slurm_commands, "sbatch", fake_submit):
            SlurmSubmission(plan, run_dir, 1).run(plan_units(plan, nodes, 1000, arrays=False))
    else:
        with mock.patch.object(sge_commands, "qsub", fake_submit):
            SgeSubmission(plan, run_dir, 1, "smp").run(sge_units(plan, nodes, 1000, arrays=False))
    assert len(submitted) == 3 and len(set(submitted)) == 3


def test_the_batch_wrapper_logs_a_long_node_name(tmp_path: Path) -> None:
    layout = RunLayout(tmp_path / "runs", "r1")
    layout.logs_dir.mkdir(parents=True)
    node = f"hello.{LONG}"
    wrapper = [
        sys.executable, "-m", "dagflow.engines.batch.node", "--journal", str(layout.journal_path),
        "--logs", str(layout.logs_dir), "--node", node, "--workdir", str(tmp_path), "--", "echo", "hi",
    ]  # fmt: skip
    result = subprocess.run(wrapper, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert layout.stdout_path(node).read_text() == "hi\n"


def test_condor_names_the_logs_of_long_node_names_by_a_macro(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    dag = compile_plan(plan, tmp_path / "out", log_dir=tmp_path / "logs", data_mode="shared")
    submit = (tmp_path / "out" / "hello.sub").read_text()
    assert f"{tmp_path / 'logs'}/$(DagflowLog).out" in submit and "$(JOB).out" not in submit
    text = dag.read_text()
    for node in (f"hello.{LONG}", "hello.us." + ".".join([VALUE] * 3)):
        assert f'DagflowLog="{file_stem(node)}"' in text


def test_condor_submit_files_of_short_names_still_use_the_node_name(tmp_path: Path) -> None:
    (tmp_path / "pipeline.yaml").write_text(PIPELINE.replace(VALUE, "x").replace("xw, ", ""))
    plan = expand(load_spec(tmp_path / "pipeline.yaml"), run_id="r1")
    dag = compile_plan(plan, tmp_path / "out", log_dir=tmp_path / "logs", data_mode="shared")
    assert "$(JOB).out" in (tmp_path / "out" / "hello.sub").read_text() and "DagflowLog" not in dag.read_text()


def test_a_promotion_verdict_of_a_long_node_name_round_trips(tmp_path: Path) -> None:
    node = f"evaluate.promote.{LONG}"
    write_verdict(tmp_path, Verdict(node=node, verdict="promoted", reason="better", metric="loss", better="lower"))
    assert (read_verdict(tmp_path, node) or {})["verdict"] == "promoted"
