"""`checkpoint:` in the pipeline file: validation (located errors, exit 2), the plan's engine-neutral fields,
and the HTCondor submit lines each data mode compiles to (read back by HTCondor's own submit parser)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import htcondor2
import pytest

from dagflow.engines.condor.checkpoint import checkpoint_lines
from dagflow.engines.condor.compile import compile_plan
from dagflow.errors import SpecError
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import load_spec

REPO = Path(__file__).resolve().parents[1]

GOOD = """\
name: ck
matrix: {region: [us, br]}
steps:
  train:
    kind: train
    command: python train.py
    retries: {count: 2, unless_exit: [2]}
    checkpoint: {files: [ckpt/, "state-{region}.json"], exit_code: 86, max_restarts: 50}
  plain:
    command: python other.py
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        load_spec(write(tmp_path, text))
    return [f"{d.line}:{d.column} {d.path}: {d.message}" for d in caught.value.diagnostics]


def step_with(checkpoint: str, kind: str = "train", extra: str = "") -> str:
    body = "from: a/\n    to: b/" if kind == "transfer" else "command: python train.py"
    head = "name: ck\nparams: {up: ../x}\nsteps:\n  train:\n"
    return f"{head}    kind: {kind}\n    {body}\n{extra}    checkpoint: {checkpoint}\n"


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        ("{files: [/abs/state.pt]}", "7:26 steps.train.checkpoint.files[0]: '/abs/state.pt' is an absolute path"),
        ("{files: [../state.pt]}", "7:26 steps.train.checkpoint.files[0]: '../state.pt' escapes the job's directory"),
        ("{files: [a/../../s]}", "steps.train.checkpoint.files[0]: 'a/../../s' escapes the job's directory"),
        ("{files: ['{params.up}/s']}", "'{params.up}/s' escapes the job's directory"),
        ("{files: [.]}", "'.' escapes the job's directory"),
        ("{files: ['a b']}", "'a b': checkpoint file names cannot hold spaces, commas or quotes"),
        ("{files: [s], exit_code: 0}", "steps.train.checkpoint.exit_code: must be at least 1"),
        ("{files: [s], exit_code: 256}", "steps.train.checkpoint.exit_code: must be at most 255"),
        ("{files: []}", "steps.train.checkpoint.files: needs at least 1 entry"),
        ("{exit_code: 85}", "steps.train.checkpoint: missing required key 'files'"),
        ("{files: [s], code: 85}", "steps.train.checkpoint.code: unknown key 'code'"),
        ("{files: ['{regoin}/s']}", "unknown template variable {regoin}"),
    ],
)
def test_bad_checkpoints_are_located_errors(tmp_path: Path, checkpoint: str, expected: str) -> None:
    found = problems(tmp_path, step_with(checkpoint))
    assert any(expected in problem for problem in found), found


def test_an_exit_code_also_in_unless_exit_is_refused_where_the_code_is_written(tmp_path: Path) -> None:
    extra = "    retries: {count: 1, unless_exit: [3, 85]}\n"
    found = problems(tmp_path, step_with("{files: [s], exit_code: 85}", extra=extra))
    assert any(
        p.startswith("8:") and "steps.train.checkpoint.exit_code: checkpoint exit code 85 is also in "
        "retries.unless_exit" in p for p in found
    ), found
    # the default code (85) collides too, reported at the checkpoint key
    found = problems(tmp_path, step_with("{files: [s]}", extra=extra))
    assert any("steps.train.checkpoint: checkpoint exit code 85" in p for p in found), found


def test_a_transfer_step_cannot_checkpoint(tmp_path: Path) -> None:
    found = problems(tmp_path, step_with("{files: [s]}", kind="transfer"))
    assert any("steps.train.checkpoint: a transfer step cannot checkpoint" in p for p in found), found


def test_a_checkpoint_path_through_a_symlink_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    os.symlink(outside, project / "ckpt")
    (project / "pipeline.yaml").write_text(step_with("{files: [ckpt/state.pt]}"), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(project / "pipeline.yaml")
    assert "resolves outside the job's directory" in str(caught.value)


def test_dagflow_validate_exits_2_with_file_line_and_field(tmp_path: Path) -> None:
    write(tmp_path, step_with("{files: [../escape]}"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "validate", "pipeline.yaml"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "pipeline.yaml:7:" in done.stdout + done.stderr
    assert "steps.train.checkpoint.files[0]" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def plan_of(tmp_path: Path, text: str = GOOD) -> Plan:
    return expand(load_spec(write(tmp_path, text)))


def test_the_plan_carries_the_checkpoint_engine_neutrally_and_round_trips(tmp_path: Path) -> None:
    plan = plan_of(tmp_path)
    train = plan.steps["train"]
    assert (train.checkpoint_exit_code, train.checkpoint_files, train.checkpoint_max_restarts) == (
        86, ("ckpt/", "state-{region}.json"), 50,
    )
    assert plan.nodes["train.br"].checkpoint_files == ["ckpt/", "state-br.json"]
    assert plan.steps["plain"].checkpoint_exit_code is None and plan.nodes["plain.us"].checkpoint_files == []
    again = Plan.from_json(plan.to_json())
    assert again.steps["train"] == train and again.nodes["train.br"].checkpoint_files == ["ckpt/", "state-br.json"]
    old = json.loads(plan.to_json())  # a plan written before checkpointing existed still loads
    for step in old["steps"].values():
        for key in ("checkpoint_exit_code", "checkpoint_files", "checkpoint_max_restarts"):
            step.pop(key)
    for node in old["nodes"]:
        node.pop("checkpoint_files")
    assert Plan.from_dict(old).steps["train"].checkpoint_exit_code is None


ONE_FILE = GOOD.replace('"state-{region}.json"', "model/state.json")


def submit_of(tmp_path: Path, mode: str, text: str = ONE_FILE) -> htcondor2.Submit:
    plan = plan_of(tmp_path, text)
    compile_plan(plan, tmp_path / f"out-{mode}", data_mode=mode)
    return htcondor2.Submit((tmp_path / f"out-{mode}" / "train.sub").read_text())


def test_transfer_mode_compiles_to_the_self_checkpointing_idiom(tmp_path: Path) -> None:
    submit = submit_of(tmp_path, "transfer")
    assert submit["checkpoint_exit_code"] == "86"
    assert submit["transfer_checkpoint_files"] == "ckpt, model/state.json"  # `ckpt/` would mean its contents
    assert submit["when_to_transfer_output"] == "ON_EXIT_OR_EVICT"
    assert submit["should_transfer_files"] == "YES"
    assert "checkpoint_exit_code" not in submit_of(tmp_path, "transfer", GOOD.replace("    checkpoint:", "    #"))


def test_shared_mode_says_only_the_exit_code(tmp_path: Path) -> None:
    # condor_submit refuses ON_EXIT_OR_EVICT with should_transfer_files = NO; files stay in place anyway
    submit = submit_of(tmp_path, "shared")
    assert submit["checkpoint_exit_code"] == "86"
    assert submit["should_transfer_files"] == "NO"
    assert "transfer_checkpoint_files" not in submit and "when_to_transfer_output" not in submit


def test_max_restarts_is_ored_onto_the_periodic_remove_the_step_already_has(tmp_path: Path) -> None:
    cap = "((CheckpointNumber =!= undefined) && (CheckpointNumber >= 50))"
    submit = submit_of(tmp_path, "shared")
    assert submit.expand("periodic_remove") == f"(false) || {cap}"
    timed = submit_of(tmp_path, "transfer", ONE_FILE.replace("    retries:", "    timeout: 1h\n    retries:"))
    expression = timed.expand("periodic_remove")
    assert expression.endswith(f") || {cap}") and "HoldReasonCode =?= 47" in expression  # the timeout's kept


def test_per_node_checkpoint_files_are_named_by_the_directory_they_share(tmp_path: Path) -> None:
    # each job's scratch directory holds only its own node's files, so HTCondor can move the whole directory
    submit = submit_of(tmp_path, "transfer", GOOD.replace('"state-{region}.json"', "'models/{region}/state.pt'"))
    assert submit["transfer_checkpoint_files"] == "ckpt, models"
    plan = plan_of(tmp_path)  # state-{region}.json: no directory to name
    with pytest.raises(ValueError, match="differs between the step's nodes and shares no directory"):
        checkpoint_lines(plan.steps["train"], [n for n in plan.nodes.values() if n.step == "train"], transfer=True)
    assert checkpoint_lines(plan.steps["train"], [plan.nodes["train.us"]], transfer=False)[0] == (
        "checkpoint_exit_code     = 86"
    )


def test_dagflow_lint_accepts_the_compiled_checkpointing_dag(tmp_path: Path) -> None:
    plan = plan_of(tmp_path, ONE_FILE)
    dag = compile_plan(plan, tmp_path / "out", data_mode="transfer")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "dagflow", "lint", str(dag.parent)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
