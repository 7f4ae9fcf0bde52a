"""A plan that belongs to no engine (#31 items 1 and 2): fields only one engine reads ride in its section of
the plan, and the engine checks them once, through the spec check its declaration names."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.step_fields import custom_attributes, requirements_expression
from dagflow.engines.registry import register_engine, spec_checks, unregister_engine
from dagflow.errors import Diagnostic, SpecError
from dagflow.plan import Plan
from dagflow.plan.expand import expand
from dagflow.spec import Spec, parse_spec
from dagflow.spec.yamlpos import dotted

PIPELINE = """\
name: p
matrix: {region: [us, br]}
steps:
  train:
    command: python train.py {region}
    requirements: CUDACapability >= 7.0
    classads: {Team: recs}
"""


def test_spec_and_plan_import_no_htcondor_bindings() -> None:
    code = "import sys, dagflow.spec, dagflow.plan; print(sorted({'classad2', 'htcondor2'} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_local_run_without_requirements_never_loads_htcondor_bindings(tmp_path: Path) -> None:
    """The condor engine's spec check runs for every engine (a bad `requirements` is wrong wherever the
    pipeline runs), but it loads HTCondor's parser only for a step that has one: a local run of any other
    pipeline pays nothing for HTCondor (it had loaded classad2 at every `dagflow run`)."""
    (tmp_path / "p.yaml").write_text("name: p\nmatrix: {region: [us, br]}\nsteps:\n  a: {command: 'true'}\n")
    code = (
        "import sys; from dagflow.cli import main\n"
        "sys.argv = ['dagflow', 'run', 'p.yaml']\n"
        "try: main()\n"
        "except SystemExit as done: assert done.code == 0, done.code\n"
        "print(sorted({'classad2', 'htcondor2'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout + done.stderr
    with_requirements = tmp_path / "q.yaml"
    with_requirements.write_text(PIPELINE)
    result = CliRunner().invoke(app, ["validate", str(with_requirements)])
    assert result.exit_code == 0, result.output  # and the one with a requirements expression is still checked


def test_requirements_ride_in_the_condor_section_and_a_format_1_plan_reads_into_it() -> None:
    plan = expand(parse_spec(PIPELINE, "p.yaml", engines=spec_checks()), run_id="r")
    step = plan.steps["train"]
    assert step.engine_fields == {"condor": {"requirements": ["CUDACapability >= 7.0"], "classads": {"Team": "recs"}}}
    for earlier in (_format_1(plan), _format_2(plan)):
        step = earlier.steps["train"]
        assert requirements_expression(step) == "CUDACapability >= 7.0"
        assert custom_attributes(step) == {"Team": "recs"}
        # cache keys are the node fingerprints: an earlier run's stay valid
        assert [earlier.node_fingerprint(n) for n in earlier.nodes.values()] == [
            plan.node_fingerprint(n) for n in plan.nodes.values()
        ]


def _format_1(plan: Plan) -> Plan:
    """plan as a dagflow before the engine sections wrote it: requirements and classads at the step's top."""
    old = json.loads(plan.to_json())
    old["format"] = 1
    for raw in old["steps"].values():
        section = raw.pop("engine_fields").get("condor", {})
        raw["requirements"] = section["requirements"][0] if section.get("requirements") else None
        raw["classads"] = section.get("classads", {})
    return Plan.from_dict(old)


def _format_2(plan: Plan) -> Plan:
    """plan as format 2 wrote it: requirements in the condor section, classads at the step's top."""
    old = json.loads(plan.to_json())
    old["format"] = 2
    for raw in old["steps"].values():
        raw["classads"] = raw["engine_fields"].get("condor", {}).pop("classads", {})
    return Plan.from_dict(old)


def test_the_spec_knows_no_classad_syntax_the_condor_check_does() -> None:
    bad = PIPELINE.replace("CUDACapability >= 7.0", '"CUDACapability >= && "')
    sections_only = spec_checks()
    parse_spec(bad, "p.yaml", engines=replace(sections_only, checks=()))  # the engine's field is its check's
    with pytest.raises(SpecError) as caught:
        parse_spec(bad, "p.yaml", engines=spec_checks())
    [problem] = caught.value.diagnostics
    assert problem.render().startswith("p.yaml:6:19: steps.train.requirements: ")
    assert "does not parse as a ClassAd expression" in problem.message


def refuse_team(spec: Spec, settings: Mapping[str, Any] | None) -> list[Diagnostic]:
    """A plugin engine's spec check: with its settings (it runs the pipeline), a classad `Team` is refused."""
    if settings is None:
        return []
    return [
        Diagnostic(spec.filename, *spec.positions.of(("steps", name, "classads", "Team"), key=True),
                   dotted(("steps", name, "classads", "Team")),
                   f"the checked engine refuses Team (jobs={settings['jobs']})")
        for name, step in spec.model.steps.items() if "Team" in step.classads  # type: ignore[attr-defined]
    ]  # fmt: skip


@pytest.fixture
def checked_engine():  # type: ignore[no-untyped-def]
    register_engine("checked", "dagflow.engines.local.engine:LocalEngine",
                    spec_check=f"{__name__}:refuse_team")  # fmt: skip
    yield "checked"
    unregister_engine("checked")


def test_an_engines_declared_check_is_reached_by_validate_and_run(tmp_path: Path, checked_engine: str) -> None:
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(textwrap.dedent(PIPELINE))
    runner = CliRunner()
    plain = runner.invoke(app, ["validate", str(pipeline)])
    assert plain.exit_code == 0, plain.output
    for args in (["validate", str(pipeline), "--engine", checked_engine],
                 ["run", str(pipeline), "--engine", checked_engine, "--runs-dir", str(tmp_path / "runs")]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        refused = f"{pipeline}:7:16: steps.train.classads.Team: the checked engine refuses Team (jobs=None)"
        assert refused in result.output
    assert not (tmp_path / "runs").exists()
