"""Engine-neutral plans: warnings for step fields an engine ignores, one name for the Dagflow* attributes,
and the search optimiser's own key (`optimizer:`, formerly `engine:`)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.submit_writer import axis_macro
from dagflow.engines.registry import spec_checks
from dagflow.errors import SpecError
from dagflow.spec import parse_spec
from dagflow.spec.attributes import attribute_name

PIPELINE = """\
name: p
steps:
  train:
    command: echo hi
    resources: {gpus: 1, gpu_memory: 16GB, cuda_capability: 8.0, disk: 2GB, memory: 2GB}
    requirements: OpSys == "LINUX"
    priority: 3
    timeout: 1h
"""


def validate(tmp_path: Path, text: str, *args: str):  # -> click.testing.Result
    (tmp_path / "p.yaml").write_text(text)
    return CliRunner().invoke(app, ["validate", str(tmp_path / "p.yaml"), *args])


def warned_fields(stderr: str) -> list[str]:
    return [line.split(": ")[2] for line in stderr.splitlines() if line.startswith("warning: ")]


def test_validate_warns_about_each_field_slurm_ignores(tmp_path: Path) -> None:
    result = validate(tmp_path, PIPELINE, "--engine", "slurm")
    assert result.exit_code == 0 and "valid" in result.stdout
    assert warned_fields(result.stderr) == [
        "steps.train.resources.gpu_memory",
        "steps.train.resources.cuda_capability",
        "steps.train.resources.disk",
        "steps.train.requirements",
        "steps.train.priority",
    ]
    assert f"warning: {tmp_path / 'p.yaml'}:6:5: steps.train.requirements: the slurm engine ignores requirements" in (
        result.stderr
    )


def test_validate_warns_about_each_field_local_ignores(tmp_path: Path) -> None:
    result = validate(tmp_path, PIPELINE, "--engine", "local")
    assert result.exit_code == 0
    assert warned_fields(result.stderr) == ["steps.train.resources.cuda_capability", "steps.train.requirements"]


@pytest.mark.parametrize(("engine", "warned"), [("slurm", True), ("sge", True), ("local", False), ("condor", False)])
def test_memory_growth_cap_is_warned_about_where_the_engine_cannot_grow_memory(
    tmp_path: Path, engine: str, warned: bool
) -> None:
    text = "name: p\nsteps:\n  train:\n    command: echo hi\n    resources: {memory: 1GB, memory_max: 4GB}\n"
    result = validate(tmp_path, text, "--engine", engine)
    assert result.exit_code == 0
    assert ("steps.train.resources.memory_max" in warned_fields(result.stderr)) is warned


def test_condor_honours_every_field_and_plain_validate_warns_of_nothing(tmp_path: Path) -> None:
    assert validate(tmp_path, PIPELINE, "--engine", "condor").stderr == ""
    assert validate(tmp_path, PIPELINE).stderr == ""


def test_run_warns_about_fields_its_engine_ignores(tmp_path: Path) -> None:
    without_gpus = PIPELINE.replace("gpus: 1, gpu_memory: 16GB, cuda_capability: 8.0, ", "")
    (tmp_path / "p.yaml").write_text(without_gpus)
    result = CliRunner().invoke(app, ["run", str(tmp_path / "p.yaml"), "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert warned_fields(result.stderr) == ["steps.train.requirements"]


def test_one_rule_names_the_dagflow_attributes() -> None:
    assert attribute_name("region") == "DagflowRegion"
    assert attribute_name("data_split") == "DagflowDataSplit" == axis_macro("data_split")


def test_a_classad_named_like_an_axis_attribute_is_refused_where_it_is_written() -> None:
    text = textwrap.dedent("""\
        name: p
        matrix: {data_split: [a, b]}
        steps:
          train:
            command: echo {data_split}
            classads: {DagflowDataSplit: 1}
        """)
    with pytest.raises(SpecError) as caught:
        parse_spec(text, "p.yaml", engines=spec_checks())
    (problem,) = caught.value.diagnostics
    assert (problem.line, problem.column, problem.path) == (6, 16, "steps.train.classads.DagflowDataSplit")
    assert "set by dagflow" in problem.message and "matrix axis 'data_split'" in (problem.hint or "")


SEARCH = """\
name: p
params: {lr: 0.1}
steps:
  train:
    command: echo {params.lr}
    metrics: m.json
search:
  objective: {metric: loss}
  variables: {lr: {type: FLOAT, min: 0.001, max: 1}}
"""


def test_the_optimiser_is_set_with_optimizer() -> None:
    spec = parse_spec(SEARCH + "  optimizer: random\n", "p.yaml", engines=spec_checks())
    assert spec.model.search is not None and spec.model.search.optimizer == "random"
    assert spec.warnings == ()


def test_the_old_engine_key_still_works_with_a_deprecation_warning(tmp_path: Path) -> None:
    spec = parse_spec(SEARCH + "  engine: random\n", "p.yaml", engines=spec_checks())
    assert spec.model.search is not None and spec.model.search.optimizer == "random"
    (warning,) = spec.warnings
    assert (warning.line, warning.path) == (10, "search.engine") and "deprecated" in warning.message
    result = validate(tmp_path, SEARCH + "  engine: random\n")
    assert result.exit_code == 0 and "search.engine is deprecated" in result.stderr


def test_both_optimiser_keys_at_once_are_refused() -> None:
    with pytest.raises(SpecError, match="give optimizer only"):
        parse_spec(SEARCH + "  engine: random\n  optimizer: gp\n", "p.yaml", engines=spec_checks())


def test_an_unknown_optimiser_is_located_at_the_key_written(tmp_path: Path) -> None:
    result = validate(tmp_path, SEARCH + "  optimizer: bayes\n")
    assert result.exit_code == 2 and "search.optimizer: unknown optimiser 'bayes'" in result.stderr
