"""What the command line loads before it answers (#41 item 1): a bare `dagflow --version` and `dagflow --help`
load no typer, no pipeline model, no engine and no plan; a command's --help and shell completion load no
pipeline model, engine or plan. The quick --help (cli/quick.py) prints exactly what typer prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env

from dagflow.cli import root_help
from dagflow.cli.commands import COMMAND_MODULES, click_command, register

# Prints, at exit, the modules loaded by the time `dagflow ARGS...` (main, as the console script calls it) ended.
LOADED = """\
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))
sys.argv = ["dagflow", *sys.argv[1:]]
from dagflow.cli import main
main()
"""
# What typer itself prints for ARGS..., past the quick answers.
TYPER = """\
import sys
sys.argv = ["dagflow", *sys.argv[1:]]
from dagflow.cli.commands import run
run()
"""
# pydantic itself is typer's (it coerces parameter values with it); dagflow's pydantic models are spec.model's.
HEAVY = ("yaml", "networkx", "numpy", "sqlalchemy", "htcondor2", "classad2", "dagflow.spec.model",
         "dagflow.spec.load", "dagflow.plan", "dagflow.run.journal", "dagflow.run.status")
TYPER_ENV = ("TYPER_", "_TYPER", "_DAGFLOW_COMPLETE", "FORCE_COLOR", "PY_COLORS", "GITHUB_ACTIONS", "TERMINAL_WIDTH",
             "COLUMNS", "NO_COLOR")


def plain_env(**extra: str) -> dict[str, str]:
    """The test's environment without typer's or rich's settings, with extra."""
    env = {name: value for name, value in cli_env().items() if not name.startswith(TYPER_ENV)}
    return {**env, **extra}


def loaded(tmp_path: Path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    result = subprocess.run([sys.executable, "-c", LOADED, *args], cwd=tmp_path, env=plain_env(**env),
                            capture_output=True, text=True, timeout=120)
    return result, json.loads(result.stderr.strip().splitlines()[-1])


def dagflow_modules(modules: list[str]) -> list[str]:
    return [name for name in modules if name == "dagflow" or name.startswith("dagflow.")]


def heavy(modules: list[str]) -> list[str]:
    return [name for name in modules if name.startswith(HEAVY) or name.endswith(".engine")]


def test_a_bare_version_loads_only_the_quick_answer(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "--version")
    assert result.returncode == 0 and result.stdout.startswith("dagflow ")
    assert dagflow_modules(modules) == ["dagflow", "dagflow.cli", "dagflow.cli.quick"]
    assert not [name for name in modules if name.startswith(("typer", "click", "rich", "pydantic"))]
    assert heavy(modules) == []


def test_a_bare_help_loads_only_the_quick_answer_and_rich(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "--help")
    assert result.returncode == 0 and "Commands" in result.stdout
    assert dagflow_modules(modules) == ["dagflow", "dagflow.cli", "dagflow.cli.quick", "dagflow.cli.root_help"]
    assert not [name for name in modules if name.startswith(("typer", "click", "pydantic", "rich.markdown"))]
    assert heavy(modules) == []


@pytest.mark.parametrize(
    "args", [("run", "--help"), ("submit", "--help"), ("validate", "--help"), ("search", "run", "--help")]
)
def test_a_command_help_loads_no_model_engine_or_plan(tmp_path: Path, args: tuple[str, ...]) -> None:
    result, modules = loaded(tmp_path, *args)
    assert result.returncode == 0, result.stderr
    assert "--help" in result.stdout
    assert heavy(modules) == []


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "region-retrain" / "pipeline.yaml"


def test_a_command_registers_only_its_own_command_module(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "plan", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert [name for name in modules if name.endswith("_cmds")] == ["dagflow.cli.spec_cmds"]


def test_a_plain_validate_loads_no_typer(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "validate", str(EXAMPLE))
    assert result.returncode == 0 and ": valid — " in result.stdout, result.stderr
    assert not [name for name in modules if name.startswith(("typer", "click", "rich", "dagflow.cli.common"))]


BAD = """name: bad
params: {x: 0.5}
search:
  engine: random
  objective: {metric: loss, goal: minimize}
  variables: {x: {type: FLOAT, min: 0, max: 1}}
steps:
  a: {command: "true", metrics: m.json, retries: -1}
"""
DEPRECATED = BAD.replace(", retries: -1", "")


@pytest.mark.parametrize("text", [BAD, DEPRECATED, None], ids=["errors", "warning", "missing"])
def test_the_quick_validate_is_what_typer_prints(tmp_path: Path, text: str | None) -> None:
    """Errors (exit 2), a deprecation warning, a missing file: the same output and exit code either way."""
    pipeline = tmp_path / "pipeline.yaml"
    if text is not None:
        pipeline.write_text(text)
    quick, typer = (
        subprocess.run([sys.executable, *how, "validate", "pipeline.yaml"], cwd=tmp_path, env=plain_env(),
                       capture_output=True, text=True, timeout=120)
        for how in (["-m", "dagflow"], ["-c", TYPER])
    )  # fmt: skip
    assert (quick.returncode, quick.stdout, quick.stderr) == (typer.returncode, typer.stdout, typer.stderr)
    assert quick.returncode == (0 if text == DEPRECATED else 2), quick.stderr


def test_a_mistyped_command_is_told_apart_from_every_command(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "valdate", "p.yaml")
    assert result.returncode == 2
    assert "No such command 'valdate'" in result.stderr and "validate" in result.stderr.split("No such")[1]
    assert sorted(name for name in modules if name.endswith("_cmds")) == sorted(
        f"dagflow.cli.{module}" for module in COMMAND_MODULES
    )


def test_completion_loads_no_model_engine_or_plan(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, _DAGFLOW_COMPLETE="complete_bash", COMP_WORDS="dagflow run --jo",
                             COMP_CWORD="2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["--jobs"]  # the local engine's flag, from its declaration
    assert heavy(modules) == []


@pytest.mark.parametrize("columns", ["40", "80", "132"])
@pytest.mark.parametrize("colour", [False, True])
def test_the_quick_help_is_what_typer_prints(tmp_path: Path, columns: str, colour: bool) -> None:
    env = plain_env(COLUMNS=columns, **({"FORCE_COLOR": "1"} if colour else {}))
    quick, typer = (
        subprocess.run([sys.executable, *how, "--help"], cwd=tmp_path, env=env, capture_output=True, timeout=120)
        for how in (["-m", "dagflow"], ["-c", TYPER])
    )
    assert quick.returncode == typer.returncode == 0, typer.stderr
    assert quick.stdout == typer.stdout
    assert (b"\x1b[" in quick.stdout) is colour


def test_the_quick_version_is_what_typer_prints(tmp_path: Path) -> None:
    quick, typer = (
        subprocess.run([sys.executable, *how, "--version"], cwd=tmp_path, env=plain_env(), capture_output=True,
                       text=True, timeout=120)
        for how in (["-m", "dagflow"], ["-c", TYPER])
    )
    assert quick.returncode == typer.returncode == 0
    assert quick.stdout == typer.stdout


def test_root_help_is_written_from_the_commands() -> None:
    import typer

    from dagflow.cli.write_root_help import root_help_source

    register()
    root = click_command()
    written = Path(root_help.__file__).read_text(encoding="utf-8")
    assert root_help_source(root, typer.Context(root, info_name="dagflow")) == written, (
        "a command's help changed: run `python -m dagflow.cli.write_root_help`"
    )


def test_typer_settings_in_the_environment_go_to_typer(tmp_path: Path) -> None:
    result, modules = loaded(tmp_path, "--help", TYPER_USE_RICH="0")
    assert result.returncode == 0
    assert "typer" in modules and "Commands" in result.stdout


def test_help_is_escaped_as_rich_escapes_it() -> None:
    """cli/commands.py escapes help texts without importing rich: the same text as rich.markup.escape gives, for
    every help text of every command and for the cases its rule has."""
    import typer
    from rich.markup import escape

    from dagflow.cli.commands import escape_markup

    register()
    texts = ["a\\", "a\\\\", "\\[bold]x", "\\\\[x] y", "[default: 1]", "[A-Z] [/x] [#f00] [@click]", "[a][b"]

    def collect(command: typer.main.TyperGroup) -> None:
        texts.extend(text for text in (command.help, command.short_help) if text)
        texts.extend(param.help for param in command.params if getattr(param, "help", None))
        for subcommand in getattr(command, "commands", {}).values():
            collect(subcommand)

    collect(typer.main.get_command(register()))  # the texts as written, before click_command tidies them
    assert len(texts) > 100
    assert [escape_markup(text) for text in texts] == [escape(text) for text in texts]


def test_a_submit_loads_no_reader_of_runs_and_no_rich(tmp_path: Path) -> None:
    """What `dagflow submit` needs is imported, not what reads runs back or draws (#41 item 3): a dry run of the
    condor engine loads the compile path only."""
    (tmp_path / "pipeline.yaml").write_text("name: p\nsteps:\n  a: {command: \"true\"}\n")
    result, modules = loaded(tmp_path, "submit", "pipeline.yaml", "--dry-run", "--runs-dir", str(tmp_path / "runs"))
    assert result.returncode == 0, result.stderr
    readers = ("ingest", "observe", "event_log", "status_cache")
    unexpected = ("rich", "sqlite3", "dagflow.search", *(f"dagflow.engines.condor.{name}" for name in readers))
    assert [name for name in modules if name.startswith(unexpected)] == []
