"""The docs site builds and what it shows exists (issue #42 items 1 and 2).

- `mkdocs build --strict` of mkdocs.yml succeeds (a broken link or anchor, a page outside the nav fails
  it), with the reference pages that docs/hooks/reference.py makes from `dagflow schema` and `--help`;
- every line of a fenced `bash` block in README.md, docs/ and the examples' READMEs runs a command that
  exists: a dagflow command with only options it has, a file of this repository, or a known outside tool;
- README.md is a front door: at most 150 lines, the two set-up commands first.
(tests/test_readme_yaml.py checks the YAML blocks of the same pages.)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from test_readme_yaml import REPO, fenced_blocks

from dagflow.cli import app

FENCED_BASH = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.DOTALL | re.MULTILINE)
# Programs from outside this repository that the pages run: a name not here (a typo) fails.
OUTSIDE_TOOLS = frozenset({
    "aws", "cat", "cd", "condor_config_val", "condor_history", "condor_q", "condor_token_create", "eval", "pip",
    "python", "python3", "runuser", "shred", "source", "umask",
})  # fmt: skip
SEPARATORS = frozenset({"&&", "||", "|", ";", "(", ")"})
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")
SETUP = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[examples]' "
    "&& .venv/bin/dagflow run examples/region-retrain/pipeline.yaml"
)
TESTS = (
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/ruff check . "
    "&& .venv/bin/python -m pytest -q -n 3 --dist loadfile"
)


def _shell_lines() -> list[tuple[str, str]]:
    """(FILE:LINE, line) of every command line of the fenced shell blocks, continuations joined."""
    found = []
    for page, first, block in fenced_blocks(FENCED_BASH):
        pending, start = "", first
        for offset, line in enumerate(block.splitlines()):
            if not pending:
                start = first + offset
            pending += line
            if pending.endswith("\\"):
                pending = pending[:-1] + " "
                continue
            if pending.strip() and not pending.lstrip().startswith("#"):
                found.append((f"{page.relative_to(REPO)}:{start}", pending.strip()))
            pending = ""
    return found


LINES = _shell_lines()
ROOT = typer.main.get_command(app)


def _simple_commands(line: str) -> list[list[str]]:
    """The words of each simple command of a shell line (its `$(...)` substitutions included)."""
    commands = [words for inner in SUBSTITUTION.findall(line) for words in _simple_commands(inner)]
    lexer = shlex.shlex(SUBSTITUTION.sub("SUBSTITUTED", line), posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    for token in lexer:
        if token in SEPARATORS:
            commands.append(words)
            words = []
        else:
            words.append(token)
    return [words for words in [*commands, words] if words]


def _check_dagflow(words: list[str]) -> None:
    """dagflow's subcommands as typed, and each option one that command has."""
    command: Any = ROOT
    rest = list(words)
    while rest and rest[0] in getattr(command, "commands", {}):
        command = command.commands[rest.pop(0)]
    if getattr(command, "commands", None) and rest and not rest[0].startswith("-"):
        pytest.fail(f"`dagflow {' '.join(words)}`: {rest[0]!r} is no command of `{command.name}`")
    known = {"--help"} | {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
    for word in rest:
        option = word.strip("[]").split("=", 1)[0]
        if option.startswith("-") and option not in ("-", "--") and option not in known:
            pytest.fail(f"`dagflow {' '.join(words)}`: {option} is no option of `{command.name}`")


def _check(words: list[str]) -> None:
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before a command
    if not words:
        return
    program, args = words[0], words[1:]
    if program == "env":
        _check(args)
    elif program == "runuser":
        _check(args[args.index("--") + 1 :])
    elif program.endswith("dagflow"):
        _check_dagflow(args)
    elif program.removeprefix(".venv/bin/") in ("python", "python3") and args[:2] == ["-m", "dagflow"]:
        _check_dagflow(args[2:])
    elif program.startswith(".venv/bin/"):
        assert program.removeprefix(".venv/bin/") in ("python", "python3", "pip", "ruff", "mkdocs"), program
    elif "/" in program:
        assert (REPO / program).exists(), f"{program} is no file of this repository"
    else:
        assert program in OUTSIDE_TOOLS, f"{program}: not a command the pages may run (add it to OUTSIDE_TOOLS?)"


def test_the_pages_have_shell_to_check() -> None:
    assert len(LINES) >= 40


@pytest.mark.parametrize(("where", "line"), LINES, ids=[where for where, _ in LINES])
def test_every_shell_line_runs_commands_that_exist(where: str, line: str) -> None:
    for words in _simple_commands(line):
        _check(words)


def test_a_made_up_command_or_option_fails_the_check() -> None:
    for line in ("dagflow runn pipeline.yaml", "dagflow run pipeline.yaml --jobz 2", "condor_qq", "scripts/nope.sh"):
        with pytest.raises((AssertionError, pytest.fail.Exception)):
            for words in _simple_commands(line):
                _check(words)


def test_the_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 150
    blocks = [block.strip() for block in FENCED_BASH.findall(text)]
    assert blocks[:2] == [SETUP, TESTS]
    assert TESTS in (REPO / ".ci" / "run").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_site_builds_strict_with_the_generated_reference(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "dagflow search run" in cli and "--only" in cli and "--set" in cli
    schema = (tmp_path / "site" / "reference" / "schema" / "index.html").read_text(encoding="utf-8")
    assert "StepSpec" in schema and "promote_if" in schema
