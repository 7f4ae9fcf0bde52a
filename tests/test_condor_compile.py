"""compile_plan end to end: the generated .dag and submit files, read back as DAGMan and
condor_submit would (VARS as macros on htcondor2.Submit), and matched with classad2."""

from __future__ import annotations

from pathlib import Path

import classad2
import pytest

from dagflow.engines.condor.compile import CondorCompileError, compile_plan
from dagflow.engines.condor.dag_writer import DagOptions, dag_lines
from dagflow.engines.condor.lint import lint_dag, parse_dag
from dagflow.engines.condor.records import DagFiles
from dagflow.engines.condor.submit_writer import Layout
from dagflow.engines.condor.templates import template_dir
from tests.condor_helpers import (
    argv_of,
    environment_expected,
    environment_of,
    gpu_device,
    job_ad,
    machine_ad,
    node_submit,
    regional_plan,
)

HOSTILE_ARG = "$(ENV(HOME)) # \\ \" ' naïve ✓ " + "z" * 10_000


@pytest.fixture
def compiled(tmp_path: Path):  # type: ignore[no-untyped-def]
    plan = regional_plan(
        train_argv=["python", "train.py", "--note", HOSTILE_ARG, "--lr", "0.01"],
        train_env={"NOTE": "$(ENV(HOME)) 'quoted' \"double\" # ✓", "EMPTY": ""},
        workdir=str(tmp_path),
    )
    dag_path = compile_plan(plan, tmp_path / "condor", data_mode="shared")  # /usr/bin/env argv, no transfer
    return plan, dag_path, parse_dag(dag_path)


def test_one_submit_file_per_step_and_one_dag(compiled) -> None:  # type: ignore[no-untyped-def]
    plan, dag_path, dag = compiled
    assert dag_path.name == "ratings.dag"
    assert sorted(p.name for p in dag_path.parent.glob("*.sub")) == ["fetch.sub", "report.sub", "train.sub"]
    assert set(dag.jobs) == set(plan.nodes)
    assert {dag.jobs[n][0] for n in dag.jobs} == {str(dag_path.parent / f"{s}.sub") for s in plan.steps}
    assert (dag_path.parent / "logs").is_dir()


def test_generated_dag_passes_lint(compiled) -> None:  # type: ignore[no-untyped-def]
    _, dag_path, _ = compiled
    assert lint_dag(dag_path) == []


def test_dag_wide_commands(compiled) -> None:  # type: ignore[no-untyped-def]
    _, dag_path, dag = compiled
    lines = dag_path.read_text().splitlines()
    assert any(line.startswith("NODE_STATUS_FILE ") and "ALWAYS-UPDATE" not in line for line in lines)
    assert any(line.startswith("JOBSTATE_LOG ") for line in lines)
    assert any(line.startswith("DOT ") for line in lines)
    assert "MAXJOBS gpu 16" in lines
    assert not any(line.startswith("CATEGORY gpu") for line in lines)  # htcondor2.dags' mistake
    assert dag.categories == {
        "train.us": ("gpu", dag.categories["train.us"][1]),
        "train.br": ("gpu", dag.categories["train.br"][1]),
    }
    assert dag.retries["train.us"] == (2, 3)
    assert dag.priorities == {"train.us": 5, "train.br": 5}
    assert {(p, c) for p, c, _ in dag.edges} == {
        ("fetch.us", "train.us"),
        ("fetch.br", "train.br"),
        ("train.us", "report"),
        ("train.br", "report"),
    }


def test_gpu_node_submit_description(compiled) -> None:  # type: ignore[no-untyped-def]
    _, dag_path, dag = compiled
    submit = node_submit(dag, "train.us")
    assert submit.expand("request_gpus") == "1"
    assert submit.expand("request_cpus") == "4"
    assert submit.expand("executable") == "/usr/bin/env"
    assert submit.expand("transfer_executable") == "false"
    requirements = submit.expand("requirements")
    for clause in ("(TARGET.HAS_GPU =?= true)", '(OpSys == "LINUX")'):
        assert clause in requirements
    # per-GPU limits, not slot-wide attributes a machine with mixed GPUs leaves undefined
    assert submit.expand("gpus_minimum_memory") == "16384"
    assert submit.expand("gpus_minimum_capability") == "7.5"
    assert "GlobalMemoryMb" not in requirements and "CUDACapability" not in requirements
    # condor_submit adds the GPU count clause (countMatches over AvailableGPUs) only when this is absent
    assert "TARGET.GPUs " not in requirements
    ad = job_ad(submit)
    assert ad.eval("DagflowPipeline") == "ratings"
    assert ad.eval("DagflowRunId") == "run-1"
    assert ad.eval("DagflowStep") == "train"
    assert ad.eval("DagflowRegion") == "us"
    assert ad.eval("DagflowTeam") == "recs"
    assert ad.eval("Budget") == 12 and ad.eval("Urgent") is True and ad.eval("Share") == 0.5
    assert submit.expand("output") == str(dag_path.parent / "logs" / "train.us.out")
    assert submit.expand("log") == str(dag_path.parent / "dagflow.jobs.log")
    assert submit.expand("allowed_execute_duration") == "3600"
    assert "HoldReasonCode" in submit.expand("periodic_remove")


def test_hostile_values_reach_the_job_exactly(compiled) -> None:  # type: ignore[no-untyped-def]
    plan, _, dag = compiled
    submit = node_submit(dag, "train.us")
    assert argv_of(submit) == plan.nodes["train.us"].argv
    assert environment_of(submit) == environment_expected(plan.nodes["train.us"].env, runtime=True)


def test_every_node_expands(compiled) -> None:  # type: ignore[no-untyped-def]
    plan, _, dag = compiled
    for name, node in plan.nodes.items():
        submit = node_submit(dag, name)
        assert argv_of(submit) == node.argv
        ad = job_ad(submit)
        assert ad.eval("DagflowStep") == node.step
        if "region" in node.coords:
            assert ad.eval("DagflowRegion") == node.coords["region"]
        assert submit.expand("request_gpus") == ("1" if node.step == "train" else "0")


def test_gpu_requirements_match_only_a_big_enough_gpu(compiled) -> None:  # type: ignore[no-untyped-def]
    _, _, dag = compiled
    job = job_ad(node_submit(dag, "train.us"))
    assert job.symmetricMatch(machine_ad())
    assert not job.symmetricMatch(machine_ad(HAS_GPU=None, GPUs=0, GPUs_GlobalMemoryMb=None, CUDACapability=None))
    assert not job.symmetricMatch(machine_ad(GPUs_GlobalMemoryMb=8192))
    assert not job.symmetricMatch(machine_ad(CUDACapability=6.1))
    assert not job.symmetricMatch(machine_ad(Memory=4096))
    assert not job.symmetricMatch(machine_ad(OpSys="WINDOWS"))


def test_gpu_limits_pick_a_fitting_gpu_among_mixed_ones(compiled) -> None:  # type: ignore[no-untyped-def]
    _, _, dag = compiled
    job = job_ad(node_submit(dag, "train.us"))  # 16384 MB, capability 7.5
    v100, a100 = gpu_device(16000, 7.0, "Tesla V100-PCIE-16GB"), gpu_device(40960, 8.0, "A100-SXM4-40GB")
    assert job.symmetricMatch(machine_ad(devices=[v100, a100]))
    assert not job.symmetricMatch(machine_ad(devices=[v100, v100]))
    assert not job.symmetricMatch(machine_ad(devices=[gpu_device(81920, 7.0), gpu_device(8192, 9.0)]))


def test_cpu_step_has_no_gpu_lines(compiled) -> None:  # type: ignore[no-untyped-def]
    _, dag_path, _ = compiled
    text = (dag_path.parent / "fetch.sub").read_text()
    assert "gpus_minimum" not in text and "require_gpus" not in text
    assert "{{" not in text


def test_cpu_step_matches_a_cpu_only_machine(compiled) -> None:  # type: ignore[no-untyped-def]
    _, _, dag = compiled
    job = job_ad(node_submit(dag, "fetch.us"))
    assert "HAS_GPU" not in node_submit(dag, "fetch.us").expand("requirements")
    assert job.symmetricMatch(machine_ad(HAS_GPU=None, GPUs=0, GPUs_GlobalMemoryMb=None, CUDACapability=None))


def test_several_unless_exit_codes_become_job_level_retries(tmp_path: Path) -> None:
    plan = regional_plan(workdir=str(tmp_path))
    plan.steps["train"] = regional_plan(retry_unless_exit=(3, 4)).steps["train"]
    dag = parse_dag(compile_plan(plan, tmp_path / "c"))
    assert "train.us" not in dag.retries
    submit = node_submit(dag, "train.us")
    assert submit.expand("max_retries") == "2"
    until = classad2.ClassAd()
    until["ExitCode"] = 4
    until["Until"] = classad2.ExprTree(submit.expand("retry_until"))
    assert until.eval("Until") is True
    until["ExitCode"] = 1
    assert until.eval("Until") is False


def test_the_writer_is_a_pure_line_generator(tmp_path: Path) -> None:
    from dagflow.engines.condor.compile import step_submits

    plan = regional_plan(workdir=str(tmp_path))
    layout = Layout.for_plan(plan, tmp_path / "nowhere")
    lines = list(dag_lines(plan, step_submits(plan, layout), DagFiles.in_dir(layout.out_dir, "x"), DagOptions(4)))
    assert "MAXJOBS gpu 4" in lines
    assert lines.count("JOB train.us " + str(layout.out_dir / "train.sub")) == 1
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["python", "line\nbreak"], "control character"),
        (["-i", "x"], "program name"),
        (["A=B", "x"], "program name"),
        (["python", "$$(Cpus)"], "cannot be passed literally"),
    ],
)
def test_unwritable_values_fail_with_a_located_message(tmp_path: Path, argv: list[str], match: str) -> None:
    plan = regional_plan(train_argv=argv, workdir=str(tmp_path))
    with pytest.raises(CondorCompileError, match=match) as info:
        compile_plan(plan, tmp_path / "c")
    assert "node train.us" in str(info.value)
    assert not (tmp_path / "c" / "ratings.dag").exists()


def test_bad_step_values_are_refused(tmp_path: Path) -> None:
    plan = regional_plan(workdir=str(tmp_path), requirements="Memory >")
    with pytest.raises(CondorCompileError, match="step train"):
        compile_plan(plan, tmp_path / "c")
    plan = regional_plan(workdir=str(tmp_path), classads={"DagflowStep": "x"})
    with pytest.raises(CondorCompileError, match="clashes"):
        compile_plan(plan, tmp_path / "c")


def test_templates_are_found_in_the_checkout() -> None:
    assert {p.name for p in template_dir().glob("*.sub")} >= {
        "transfer.sub",
        "train.sub",
        "evaluate.sub",
        "command.sub",
    }


def test_a_template_without_the_gpus_line_is_refused_for_a_gpu_step(tmp_path: Path) -> None:
    from dagflow.engines.condor.templates import fill

    template = "executable = /usr/bin/env\narguments = \"$(DagflowArgs)\"\nenvironment = \"$(DagflowEnv)\"\nqueue\n"
    fields = {"gpus": "gpus_minimum_memory      = 30720", "attributes": "", "policy": ""}
    with pytest.raises(ValueError, match=r"no \{\{gpus\}\} line.*gpus_minimum_memory"):
        fill(template, fields, [])
    assert "gpus_minimum" not in fill(template, {**fields, "gpus": ""}, [])
