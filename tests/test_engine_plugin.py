"""Plugins installed from outside dagflow, as a third party would ship them (tests/engine_plugin.py builds and
installs the package): an engine with a block and a step field of its own in the pipeline file, validated
with positions (#39 item 6); a plugin that cannot be imported, which breaks no other engine (#40 item 15);
one that claims a built-in engine's name, which is refused (#40 item 20); and one whose options clash with a
built-in engine's or a command's own flags, which are passed over (#39 review). One distribution holds all
four, as one broken or hostile plugin sits beside the others in a real environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import engine_plugin as plugin
import pytest

DISTRIBUTION = "dagflow-odd-engines"
PYPROJECT = plugin.pyproject(
    DISTRIBUTION,
    {"sectioned": "dagflow_odd:SECTIONED", "broken": "dagflow_odd_broken:ENGINE", "local": "dagflow_odd:IMPOSTOR",
     "clashing": "dagflow_odd:CLASHING"},
    ("dagflow_odd", "dagflow_odd_broken"),
)

ODD = '''\
"""An engine with its own block (`sectioned: {queue: fast}`) and step field (`tier: 2`), and an impostor."""

from typing import ClassVar, Literal

from pydantic import Field

from dagflow.engines.base import EngineDeclaration, EngineOption
from dagflow.engines.local.engine import LocalEngine
from dagflow.engines.local.settings import LOCAL_OPTIONS
from dagflow.spec.model import Strict
from dagflow.spec.sections import EngineSection


class SectionedEngine(LocalEngine):
    name: ClassVar[str] = "sectioned"
    summary: ClassVar[str] = "a plugin engine with a section of its own"


class Block(Strict):
    queue: Literal["fast", "slow"] = "fast"


class StepFields(Strict):
    tier: int | None = Field(None, ge=1, description="the tier a node runs at")


SECTION = EngineSection(block=Block, block_help="the sectioned engine's settings", step_fields=StepFields)
SECTIONED = EngineDeclaration("dagflow_odd:SectionedEngine", LOCAL_OPTIONS, section="dagflow_odd:SECTION")


class Impostor(LocalEngine):
    name: ClassVar[str] = "local"

    def __init__(self, *args, **kwargs):
        raise SystemExit("the impostor local engine ran")


IMPOSTOR = EngineDeclaration("dagflow_odd:Impostor", LOCAL_OPTIONS)


class ClashingEngine(LocalEngine):
    name: ClassVar[str] = "clashing"


CLASHING = EngineDeclaration("dagflow_odd:ClashingEngine", (
    *LOCAL_OPTIONS,
    EngineOption("jobs", ("--jobs",), "local's option name with other flags", int),
    EngineOption("threads", ("-j",), "local's -j under another name", int),
    EngineOption("json_too", ("--json",), "a flag of the commands' own"),
    EngineOption("queue", ("--queue",), "an option of its own", str),
))
'''

BROKEN = '''\
raise RuntimeError("this plugin is broken")
'''

PIPELINE = """\
name: p
sectioned: {queue: slow}
steps:
  a:
    command: "true"
    tier: 2
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    site = plugin.install_plugin(
        tmp_path_factory.mktemp("odd"), PYPROJECT, {"dagflow_odd": ODD, "dagflow_odd_broken": BROKEN}
    )
    return plugin.plugin_env(site)


def dagflow(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dagflow", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def write(tmp_path: Path, text: str) -> str:
    (tmp_path / "p.yaml").write_text(text)
    return "p.yaml"


def test_a_plugins_block_and_step_field_are_validated_and_carried_in_its_section(
    env: dict[str, str], tmp_path: Path
) -> None:
    done = dagflow(env, tmp_path, "validate", write(tmp_path, PIPELINE))
    assert done.returncode == 0, done.stderr
    shown = dagflow(env, tmp_path, "plan", "p.yaml", "--json")
    assert shown.returncode == 0, shown.stderr
    plan = json.loads(shown.stdout)
    assert plan["engine_defaults"] == {"sectioned": {"queue": "slow"}}
    assert plan["steps"]["a"]["engine_fields"] == {"sectioned": {"tier": 2}}
    schema = json.loads(dagflow(env, tmp_path, "schema").stdout)
    assert schema["properties"]["sectioned"]["description"] == "the sectioned engine's settings"
    assert "tier" in schema["$defs"]["StepSpec"]["properties"] and "condor" in schema["properties"]
    ran = dagflow(env, tmp_path, "run", "p.yaml")  # another engine runs it, saying what it ignores
    assert ran.returncode == 0, ran.stderr


def test_a_plugins_block_and_step_field_are_refused_with_positions(env: dict[str, str], tmp_path: Path) -> None:
    bad = PIPELINE.replace("slow", "slwo").replace("tier: 2", "tier: 0\n    tierr: 1")
    done = dagflow(env, tmp_path, "validate", write(tmp_path, bad + "sectiond: {}\n"))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert [line for line in done.stderr.splitlines() if line.startswith("p.yaml")] == [
        "p.yaml:2:20: sectioned.queue: expected 'fast' or 'slow', not 'slwo'; did you mean 'slow'?",
        "p.yaml:6:11: steps.a.tier: must be at least 1",
        "p.yaml:7:5: steps.a.tierr: unknown key 'tierr' (allowed: kind, description, needs, matrix, over, command, "
        "from, to, resources, requirements, classads, tier, env, retries, timeout, priority, inputs, outputs, "
        "metrics, publish, promote_if, runtime, checkpoint); did you mean 'tier'?",
        "p.yaml:8:1: sectiond: unknown key 'sectiond' (allowed: name, description, matrix, params, steps, search, "
        "schedule, runtime, condor, sectioned); did you mean 'sectioned'?",
    ]


def test_a_broken_plugin_breaks_no_other_engine_and_is_unavailable_by_name(env: dict[str, str], tmp_path: Path) -> None:
    write(tmp_path, "name: p\nsteps:\n  a: {command: 'true'}\n")
    for args in (["validate", "p.yaml"], ["run", "p.yaml", "--engine", "local"], ["run", "p.yaml"]):
        done = dagflow(env, tmp_path, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    chosen = dagflow(env, tmp_path, "run", "p.yaml", "--engine", "broken")
    assert chosen.returncode == 2 and "Traceback" not in chosen.stderr, chosen.stderr
    assert "the broken engine is not available here: this plugin is broken" in chosen.stderr


def test_a_plugin_cannot_take_a_builtin_engines_name(env: dict[str, str], tmp_path: Path) -> None:
    write(tmp_path, "name: p\nsteps:\n  a: {command: 'true'}\n")
    done = dagflow(env, tmp_path, "run", "p.yaml", "--json")
    assert done.returncode == 0, done.stderr  # the built-in local engine ran it, not the impostor
    assert "impostor" not in done.stderr + done.stdout
    assert (f"warning: ignoring the 'local' engine of the {DISTRIBUTION} distribution: 'local' is a built-in "
            "engine of dagflow's") in done.stderr  # fmt: skip
    run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
    resumed = dagflow(env, tmp_path, "run", "--resume", run_id)  # a recorded local run is continued by dagflow's
    assert "impostor" not in resumed.stderr + resumed.stdout, resumed.stderr


def test_a_plugins_clashing_options_are_passed_over_and_break_no_command(env: dict[str, str], tmp_path: Path) -> None:
    write(tmp_path, "name: p\nsteps:\n  a: {command: 'true'}\n")
    tried = (["run", "p.yaml", "--json", "-j", "1"], ["submit", "--help"], ["run", "p.yaml", "--engine", "clashing"])
    for args in tried:
        done = dagflow(env, tmp_path, *args)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (args, done.stderr)
    warned = [line for line in done.stderr.splitlines() if "clashing engine" in line]
    assert warned == [
        "warning: ignoring option jobs (--jobs) of the clashing engine: the local engine declares jobs as --jobs, -j",
        "warning: ignoring option threads (-j) of the clashing engine: -j is the local engine's option jobs",
        "warning: ignoring option json_too (--json) of the clashing engine: --json is a flag of `dagflow run` itself",
    ], done.stderr
    own = dagflow(env, tmp_path, "run", "p.yaml", "--engine", "clashing", "--queue", "q1")  # what does not clash
    assert own.returncode == 0, own.stderr
    elsewhere = dagflow(env, tmp_path, "run", "p.yaml", "--queue", "q1")
    assert elsewhere.returncode == 2 and "--queue: only for --engine clashing, not local" in elsewhere.stderr
