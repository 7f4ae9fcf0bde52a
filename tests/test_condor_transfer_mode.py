"""The condor engine's data modes and runtime settings, without a pool: the generated submit text read back by
HTCondor's own parser (htcondor2.Submit), the DAG by condor_dag_checker, the node wrapper run as a real
process, and the validation the transfer mode adds. The pool runs are in test_condor_transfer_pool.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import classad2
import pytest
from condor_helpers import argv_of, environment_of, node_submit
from condor_pool import dag_checker
from condor_runs import prepare_condor

from dagflow.engines.condor.compile import CondorCompileError, compile_plan
from dagflow.engines.condor.engine import CondorEngine, CondorRunError
from dagflow.engines.condor.lint import lint_dag, parse_dag
from dagflow.engines.condor.settings import DEFAULT_MAX_TRANSFER_OUTPUT_MB
from dagflow.engines.registry import run_session, spec_checks
from dagflow.plan.expand import expand
from dagflow.spec import load_spec

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "region-retrain"
WRAPPER = ROOT / "dagflow" / "engines" / "condor" / "node.sh"


def _example(tmp_path: Path) -> Path:
    target = tmp_path / "region-retrain"
    shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns("data", "models", "reports", ".dagflow"))
    return target / "pipeline.yaml"


def _compile(pipeline: Path, out: Path, data_mode: str | None = None):  # type: ignore[no-untyped-def]
    plan = expand(load_spec(pipeline, spec_checks()), run_id="r1")
    dag_path = compile_plan(plan, out, data_mode=data_mode)
    return plan, dag_path, parse_dag(dag_path)


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _dagflow(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False)


# -- the generated files ----------------------------------------------------------------------------------


def test_transfer_is_the_default_and_sends_inputs_scripts_and_outputs(tmp_path: Path) -> None:
    plan, dag_path, dag = _compile(_example(tmp_path), tmp_path / "condor")
    train = node_submit(dag, "train.us")
    assert train.expand("universe") == "vanilla"
    assert train.expand("executable") == str(tmp_path / "condor" / "dagflow-node.sh")
    assert os.access(tmp_path / "condor" / "dagflow-node.sh", os.X_OK)
    assert train.expand("transfer_executable") == "true"
    assert train.expand("should_transfer_files") == "YES"
    assert train.expand("preserve_relative_paths") == "true"
    assert train.expand("transfer_input_files") == "data/us/data.csv,train.py"  # declared input, then the script
    outputs = ["models/us/model.pkl", "models/us/val.csv", "models/us/train.json"]
    # exactly the declared outputs come back, each to its own path; a failed job sends back none of them
    assert train.expand("transfer_output_files") == f'"{",".join(outputs)}"'
    assert "transfer_output_remaps" not in train
    assert (train.expand("success_exit_code"), train.expand("max_retries")) == ("0", "0")
    assert argv_of(train) == ["3", *outputs, "python", "train.py", "--data", "data/us", "--out", "models/us",
                              "--alpha", "1.0", "--degree", "1"]
    evaluate = node_submit(dag, "evaluate.us")
    assert evaluate.expand("transfer_input_files") == (
        "models/us/model.pkl,models/us/val.csv,models/us/train.json,eval.py"
    )
    assert argv_of(evaluate)[:2] == ["1", "models/us/metrics.json"]  # the metrics file is its one output
    assert evaluate.expand("transfer_output_files") == '"models/us/metrics.json"'
    report = node_submit(dag, "report")
    assert report.expand("transfer_input_files") == "models,report.py"
    # The transfer step moves data on the access point (the local universe), in the pipeline's directory.
    stage = node_submit(dag, "stage.us")
    assert stage.expand("universe") == "local"
    assert stage.expand("executable") == "/usr/bin/env"
    assert stage.expand("should_transfer_files") == "NO"
    assert stage.expand("initialdir") == str(plan.workdir)
    assert lint_dag(dag_path) == []


def test_the_dag_passes_condor_dag_checker(tmp_path: Path) -> None:
    checker = dag_checker()
    if checker is None:
        pytest.skip("condor_dag_checker is neither on PATH nor in an unpacked HTCondor release")
    _, dag_path, _ = _compile(_example(tmp_path), tmp_path / "condor")
    assert lint_dag(dag_path, Path(checker)) == []


def test_shared_mode_keeps_jobs_in_the_pipeline_directory(tmp_path: Path) -> None:
    plan, _, dag = _compile(_example(tmp_path), tmp_path / "condor", data_mode="shared")
    train = node_submit(dag, "train.us")
    assert train.expand("executable") == "/usr/bin/env"
    assert train.expand("should_transfer_files") == "NO"
    assert train.expand("initialdir") == str(plan.workdir)
    assert argv_of(train)[:2] == ["python", "train.py"]
    assert train.get("transfer_input_files") is None
    assert not (tmp_path / "condor" / "dagflow-node.sh").exists()
    assert node_submit(dag, "stage.us").expand("universe") == "vanilla"


def test_the_pipeline_chooses_the_mode_and_the_flag_overrides_it(tmp_path: Path) -> None:
    pipeline = _example(tmp_path)
    pipeline.write_text(pipeline.read_text() + "condor:\n  data_mode: shared\n")
    _, _, dag = _compile(pipeline, tmp_path / "a")
    assert node_submit(dag, "train.us").expand("should_transfer_files") == "NO"
    _, _, dag = _compile(pipeline, tmp_path / "b", data_mode="transfer")
    assert node_submit(dag, "train.us").expand("should_transfer_files") == "YES"
    with pytest.raises(CondorCompileError, match="unknown data mode 'nfs'"):
        _compile(pipeline, tmp_path / "c", data_mode="nfs")


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("a,b.csv", "file transfer lists are comma-separated"),
        ("with space.csv", "file transfer lists are comma-separated"),
        ("line\nbreak.csv", "control character"),
    ],
)
def test_a_file_name_a_transfer_list_cannot_carry_is_refused(tmp_path: Path, name: str, match: str) -> None:
    pipeline = _write(tmp_path / "p.yaml", "name: p\nsteps:\n  a:\n    command: [python, x.py]\n    inputs: [x]\n")
    plan = expand(load_spec(pipeline, spec_checks()), run_id="r1")
    plan.nodes["a"].inputs = [name]
    with pytest.raises(CondorCompileError, match=match):
        compile_plan(plan, tmp_path / "condor")


def test_a_dollar_in_a_file_name_reaches_the_transfer_list_literally(tmp_path: Path) -> None:
    pipeline = _write(tmp_path / "p.yaml", "name: p\nsteps:\n  a:\n    command: [python, x.py]\n"
                      "    inputs: ['cost$(HOME).csv']\n    outputs: [out/$x.txt]\n")
    plan = expand(load_spec(pipeline, spec_checks()), run_id="r1")
    dag = parse_dag(compile_plan(plan, tmp_path / "condor"))
    submit = node_submit(dag, "a")
    assert submit.expand("transfer_input_files") == "cost$(HOME).csv"
    assert submit.expand("transfer_output_files") == '"out/$x.txt"'
    assert argv_of(submit)[:2] == ["1", "out/$x.txt"]


NESTED = """\
name: p
steps:
  a:
    command: [python, x.py]
    outputs: [models/us/model.pkl, models/us, reports/r.md]
    metrics: models/us/metrics.json
  b:
    command: [python, x.py]
"""


def test_each_declared_output_comes_back_once_and_a_node_without_outputs_sends_nothing(tmp_path: Path) -> None:
    plan = expand(load_spec(_write(tmp_path / "p.yaml", NESTED), spec_checks()), run_id="r1")
    dag = parse_dag(compile_plan(plan, tmp_path / "condor"))
    a = node_submit(dag, "a")
    assert a.expand("transfer_output_files") == '"models/us,reports/r.md"'  # the directory brings its files
    assert argv_of(a)[:5] == ["4", "models/us/model.pkl", "models/us", "reports/r.md", "models/us/metrics.json"]
    b = node_submit(dag, "b")
    # an empty list, not an unset one: unset, HTCondor would send back every file the job made
    assert b.expand("transfer_output_files") == '""'
    assert argv_of(b)[:1] == ["0"]


def _removed_when_held(submit, code: int, subcode: int) -> bool:  # type: ignore[no-untyped-def]
    job = classad2.ClassAd({"JobStatus": 5, "HoldReasonCode": code, "HoldReasonSubCode": subcode})
    job["Remove"] = classad2.ExprTree(submit.expand("periodic_remove"))
    return job.eval("Remove") is True


def test_a_hold_for_a_transfer_that_cannot_succeed_fails_the_node(tmp_path: Path) -> None:
    """#40 items 14 and 21: a job held for a link to a directory (12/21), a missing file (12 or 13 / 2) or
    more output than max_transfer_output_mb (33) is removed, so the node fails instead of waiting held."""
    _, _, dag = _compile(_example(tmp_path), tmp_path / "condor")
    train = node_submit(dag, "train.us")
    for code, subcode in ((12, 21), (13, 21), (12, 2), (13, 2), (33, 0)):
        assert _removed_when_held(train, code, subcode), (code, subcode)
    for code, subcode in ((12, 28), (13, 110), (3, 0), (21, 0)):  # a full disk, a timeout, condor_hold: wait
        assert not _removed_when_held(train, code, subcode), (code, subcode)


def test_what_a_job_sends_back_is_bounded_in_the_transfer_mode_only(tmp_path: Path) -> None:
    """#40 item 21: HTCondor's max_transfer_output_mb, from the pipeline's condor block or the default."""
    pipeline = _example(tmp_path)
    _, _, dag = _compile(pipeline, tmp_path / "a")
    assert node_submit(dag, "train.us").expand("max_transfer_output_mb") == str(DEFAULT_MAX_TRANSFER_OUTPUT_MB)
    assert node_submit(dag, "stage.us").get("max_transfer_output_mb") is None, "the access point moves its own"
    pipeline.write_text(pipeline.read_text() + "condor:\n  max_transfer_output_mb: 300\n")
    _, _, dag = _compile(pipeline, tmp_path / "b")
    assert node_submit(dag, "evaluate.br").expand("max_transfer_output_mb") == "300"
    _, _, shared = _compile(pipeline, tmp_path / "c", data_mode="shared")
    assert node_submit(shared, "train.us").get("max_transfer_output_mb") is None, "nothing is transferred"
    pipeline.write_text(pipeline.read_text().replace("300", "0"))
    invalid = _dagflow("validate", str(pipeline), cwd=tmp_path)
    assert invalid.returncode == 2 and "condor.max_transfer_output_mb" in invalid.stderr, invalid.stderr
    assert "Traceback" not in invalid.stderr


def test_an_input_outside_the_pipeline_directory_is_refused(tmp_path: Path) -> None:
    pipeline = _write(tmp_path / "p.yaml", "name: p\nsteps:\n  a:\n    command: [python, x.py]\n"
                      "    inputs: [../elsewhere.csv]\n")
    with pytest.raises(CondorCompileError, match="outside the pipeline's directory"):
        compile_plan(expand(load_spec(pipeline, spec_checks()), run_id="r1"), tmp_path / "condor")


def test_runtime_python_and_container_image(tmp_path: Path) -> None:
    pipeline = _write(tmp_path / "p.yaml", """\
name: p
runtime: {python: /opt/venv/bin/python}
steps:
  plain:
    command: python -c pass
  boxed:
    command: python3 -c pass
    runtime: {container_image: "docker://python:3.11-slim"}
""")
    _, _, dag = _compile(pipeline, tmp_path / "condor")
    plain = node_submit(dag, "plain")
    assert plain.expand("universe") == "vanilla"
    assert argv_of(plain) == ["0", "/opt/venv/bin/python", "-c", "pass"]
    assert "PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin" in environment_of(plain)
    assert "PYTHONPATH" not in environment_of(plain)  # the submitter's checkout is not on the node
    boxed = node_submit(dag, "boxed")  # the step keeps the pipeline's python and adds an image
    assert boxed.expand("universe") == "container"
    assert boxed.expand("container_image") == "docker://python:3.11-slim"
    assert argv_of(boxed) == ["0", "/opt/venv/bin/python", "-c", "pass"]


def test_the_mode_is_recorded_and_a_resume_keeps_it(tmp_path: Path) -> None:
    plan = expand(load_spec(_example(tmp_path), spec_checks()), run_id="r1")
    prepared = prepare_condor(plan, tmp_path / "runs", data_mode="shared")
    assert json.loads((prepared.layout.run_dir / "condor" / "run.json").read_text())["data_mode"] == "shared"
    engine = CondorEngine(tmp_path / "runs", {"data_mode": "transfer"})
    with pytest.raises(CondorRunError, match="compiled for the shared data mode"):
        run_session(engine).proceed(prepared.layout)


# -- the node wrapper, run as the job runs it -------------------------------------------------------------


def _wrap(scratch: Path, outputs: list[str], *argv: str) -> subprocess.CompletedProcess[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["sh", str(WRAPPER), str(len(outputs)), *outputs, *argv], cwd=scratch,
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_wrapper_checks_declared_outputs_and_moves_nothing(tmp_path: Path) -> None:
    script = "mkdir -p models/us && echo m > models/us/model.pkl && echo s > models/us/metrics.json && echo x > stray"
    done = _wrap(tmp_path, ["models/us", "models/us/metrics.json"], "sh", "-c", script)
    assert done.returncode == 0, done.stderr
    # HTCondor sends back what transfer_output_files names; the scratch directory is left as the command left it
    assert sorted(str(path.relative_to(tmp_path)) for path in tmp_path.rglob("*") if path.is_file()) == [
        "models/us/metrics.json", "models/us/model.pkl", "stray"
    ]


def test_the_wrapper_fails_a_node_whose_declared_output_is_missing(tmp_path: Path) -> None:
    done = _wrap(tmp_path, ["written.txt", "never/written.txt"], "sh", "-c", "echo y > written.txt")
    assert done.returncode == 1
    assert "declared output never/written.txt was not written" in done.stderr


def test_the_wrapper_fails_a_node_whose_output_holds_a_link_to_a_directory(tmp_path: Path) -> None:
    """#40 item 14: HTCondor holds a job whose output holds a link to a directory (HoldReasonCode 12,
    subcode 21) once part of it landed; the wrapper fails the node first, naming the link."""
    script = ("mkdir -p 'models/checkpoint 12' && echo w > 'models/checkpoint 12/w.bin'"
              " && ln -s 'checkpoint 12' models/best && ln -s 'checkpoint 12/w.bin' models/latest.bin")
    done = _wrap(tmp_path, ["models"], "sh", "-c", script)
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines() == [
        "dagflow: declared output models holds models/best, a symbolic link to a directory (checkpoint 12), "
        "which HTCondor cannot send back; make it a copy or a real directory, or declare the directory it "
        "names instead"
    ]
    linked = _wrap(tmp_path / "b", ["best", "gone"], "sh", "-c", "mkdir real && ln -s real best && ln -s nowhere gone")
    assert linked.returncode == 1
    assert "declared output best is a symbolic link to a directory (real)" in linked.stderr
    assert "declared output gone was not written by the command" in linked.stderr, "a dangling link is missing"
    dangling = _wrap(tmp_path / "c", ["out"], "sh", "-c", "mkdir out && ln -s ../nowhere out/stale")
    assert dangling.returncode == 1
    assert "declared output out holds out/stale, a symbolic link to nothing (../nowhere)" in dangling.stderr
    files = _wrap(tmp_path / "d", ["out"], "sh", "-c", "mkdir out && echo a > out/a && ln -s a out/b")
    assert (files.returncode, files.stderr) == (0, ""), "a link to a file is sent as the file"


def test_the_wrapper_keeps_a_failing_commands_exit_code(tmp_path: Path) -> None:
    done = _wrap(tmp_path, ["out.txt"], "sh", "-c", "exit 3")
    assert done.returncode == 3
    assert done.stderr == ""  # no complaint about the output a failed command did not write


def test_the_wrapper_passes_arguments_through_unchanged(tmp_path: Path) -> None:
    hostile = ["a b", "*", "$HOME", "'q'", '"d"', "-n", ""]
    code = "import json, sys; json.dump(sys.argv[1:], open('args.json', 'w'))"
    done = _wrap(tmp_path, ["args.json"], sys.executable, "-c", code, *hostile)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "args.json").read_text()) == hostile


# -- validation -------------------------------------------------------------------------------------------

ABSOLUTE = """\
name: p
{condor}steps:
  train:
    command: python train.py --data /home/me/data.csv --config=/etc/train.yaml
    inputs: [/etc/train.yaml]
"""


def test_an_undeclared_absolute_path_is_a_located_error_in_transfer_mode(tmp_path: Path) -> None:
    _write(tmp_path / "p.yaml", ABSOLUTE.format(condor="condor: {data_mode: transfer}\n"))
    done = _dagflow("validate", "p.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "p.yaml:5:14: steps.train.command: '/home/me/data.csv' is an absolute path" in done.stderr
    assert "/etc/train.yaml" not in done.stderr  # declared: the execute node has it
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_default_mode_is_checked_where_the_condor_engine_will_run(tmp_path: Path) -> None:
    _write(tmp_path / "p.yaml", ABSOLUTE.format(condor=""))
    assert _dagflow("validate", "p.yaml", cwd=tmp_path).returncode == 0  # the local engine shares everything
    done = _dagflow("validate", "p.yaml", "--engine", "condor", cwd=tmp_path)
    assert done.returncode == 2 and "'/home/me/data.csv' is an absolute path" in done.stderr, done.stderr
    done = _dagflow("compile", "p.yaml", "-o", "out", cwd=tmp_path)
    assert done.returncode == 2 and "'/home/me/data.csv' is an absolute path" in done.stderr, done.stderr
    assert _dagflow("compile", "p.yaml", "-o", "out", "--data-mode", "shared", cwd=tmp_path).returncode == 0
    _write(tmp_path / "p.yaml", ABSOLUTE.format(condor="condor: {data_mode: shared}\n"))
    assert _dagflow("validate", "p.yaml", "--engine", "condor", cwd=tmp_path).returncode == 0


SHARING = """\
name: p
matrix: {{region: [us, br]}}
steps:
  train:
    command: python train.py --out models/{{region}}
    outputs:
      - models/{{region}}/model.pkl
  report:
    needs: [train]
    over: [region]
    command: python report.py models --out reports --mode fast
{inputs}    outputs:
      - reports/report.md
"""


@pytest.mark.slow
def test_validate_warns_when_a_step_uses_files_another_step_writes_without_declaring_them(tmp_path: Path) -> None:
    _write(tmp_path / "p.yaml", SHARING.format(inputs=""))
    for script in ("train.py", "report.py"):
        _write(tmp_path / script, "")
    done = _dagflow("validate", "p.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: p.yaml:11:14: steps.report.command: the command uses 'models', which step train writes (its "
        "outputs), but this step does not list it under inputs: a pool without a shared filesystem will not "
        "deliver it; add it (or the files it reads there) to steps.report.inputs"
    ]
    _write(tmp_path / "p.yaml", SHARING.format(inputs="    inputs: [models]\n"))
    done = _dagflow("validate", "p.yaml", cwd=tmp_path)
    assert "warning" not in done.stderr, done.stderr


@pytest.mark.slow
def test_the_example_pipelines_share_nothing_undeclared() -> None:
    for pipeline in sorted((ROOT / "examples").glob("*/pipeline.yaml")):
        done = _dagflow("validate", str(pipeline), cwd=ROOT)
        assert done.returncode == 0 and "does not list it under inputs" not in done.stderr, (pipeline, done.stderr)


@pytest.mark.parametrize(
    ("runtime", "message"),
    [
        ("{python: venv/bin/python}", "steps.a.runtime.python: 'venv/bin/python' is not an absolute path"),
        ("{container_image: 'docker://a b'}", "steps.a.runtime.container_image: 'docker://a b' must be one word"),
        ("{pyhton: /x}", "steps.a.runtime.pyhton: unknown key 'pyhton'"),
    ],
)
@pytest.mark.slow
def test_bad_runtime_values_are_located_errors(tmp_path: Path, runtime: str, message: str) -> None:
    _write(tmp_path / "p.yaml", f"name: p\nsteps:\n  a:\n    command: [python, -c, pass]\n    runtime: {runtime}\n")
    done = _dagflow("validate", "p.yaml", cwd=tmp_path)
    assert done.returncode == 2
    assert "p.yaml:5:" in done.stderr and message in done.stderr, done.stderr


@pytest.mark.slow
def test_engines_without_containers_warn_that_they_ignore_the_image(tmp_path: Path) -> None:
    _write(tmp_path / "p.yaml", "name: p\nruntime: {container_image: 'docker://python:3.11'}\nsteps:\n"
           "  a:\n    command: [python, -c, pass]\n")
    done = _dagflow("validate", "p.yaml", "--engine", "sge", cwd=tmp_path)
    assert done.returncode == 0
    assert ("warning: p.yaml:2:11: runtime.container_image: the sge engine ignores runtime.container_image: "
            "its nodes run without it") in done.stderr, done.stderr
    done = _dagflow("validate", "p.yaml", "--engine", "condor", cwd=tmp_path)
    assert done.returncode == 0 and "warning" not in done.stderr, done.stderr


def test_a_job_is_not_sent_its_own_outputs_from_the_last_run_but_is_sent_what_its_command_runs(tmp_path: Path) -> None:
    pipeline = _write(tmp_path / "p" / "pipeline.yaml", """\
name: retrain
matrix:
  region: [us]
steps:
  train:
    command: sh -c "python train.py --out models/{region}/t1/model.json > log.txt"
    inputs:
      - data/{region}/data.csv
    outputs:
      - models/{region}/t1/model.json
  tune:
    command: python train.py --out models/{region}/t2/model.json
    inputs:
      - data/{region}/data.csv
    outputs:
      - models/{region}/t2/model.json
""")
    _write(tmp_path / "p" / "train.py", "import helpers\n")
    _write(tmp_path / "p" / "helpers.py", "")
    _write(tmp_path / "p" / "data" / "us" / "data.csv", "a,1\n")
    for trial in ("t1", "t2"):  # what the last run left
        _write(tmp_path / "p" / "models" / "us" / trial / "model.json", "{}")
    _write(tmp_path / "p" / "log.txt", "")  # written by the shell's redirection: not an input
    _, _, dag = _compile(pipeline, tmp_path / "condor")
    assert node_submit(dag, "tune.us").expand("transfer_input_files") == "data/us/data.csv,train.py,helpers.py"
    assert node_submit(dag, "train.us").expand("transfer_input_files") == "data/us/data.csv,train.py,helpers.py"
