"""Output at 80 columns: node names stay whole and distinguishable, tables break no word, help reads as
prose; piped output is never cut at all (issue #30, item 4)."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from terminal_support import in_a_terminal
from test_local_support import cli_env
from test_resources_suggest import _history, _pipeline

from dagflow.cli import app

pytestmark = pytest.mark.slow  # its module fixture alone takes seconds: not for the fast subset

# Node names sharing a long prefix, differing only at the end; the first step fails, so the second's
# `why` names the first's nodes too.
PIPELINE = """\
name: longnames
matrix:
  region: [us, br]
steps:
  train_ranking_model_publish:
    command: [python, -c, "import sys; sys.exit(3)"]
  train_ranking_model_promote:
    needs: [train_ranking_model_publish]
    command: [python, -c, "pass"]
"""
NODES = [f"train_ranking_model_{step}.{region}" for step in ("publish", "promote") for region in ("us", "br")]


def _cli(*args: str, cwd: Path, columns: int = 80) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env={**cli_env(), "COLUMNS": str(columns)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    workdir = tmp_path_factory.mktemp("longnames")
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    ran = _cli("run", "pipeline.yaml", cwd=workdir)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    return workdir


def _row(output: str, name: str) -> str:
    rows = [line for line in output.splitlines() if line.split()[:1] == [name]]
    assert len(rows) == 1, f"{name!r} is not whole on one row of:\n{output}"
    return rows[0]


def test_piped_status_shows_every_node_name_whole_on_one_line(failed_run: Path) -> None:
    shown = _cli("status", cwd=failed_run).stdout
    for name in NODES:
        row = _row(shown, name)
        assert "failed" in row, row  # the row is not folded: the state sits beside the name
    why = _row(shown, "train_ranking_model_promote.us")
    assert why.rstrip().endswith("upstream train_ranking_model_publish.us failed"), why


def test_status_on_an_80_column_terminal_keeps_node_names_whole(failed_run: Path) -> None:
    shown = in_a_terminal(["status"], failed_run, columns=80)
    for name in NODES:
        assert "failed" in _row(shown, name)
    assert max(len(line) for line in shown.splitlines()) <= 80, shown


@pytest.mark.slow
def test_resources_suggest_breaks_no_word_at_80_columns(tmp_path: Path) -> None:
    _history(tmp_path)
    _pipeline(tmp_path)
    shown = in_a_terminal(["resources", "suggest", "pipeline.yaml"], tmp_path, columns=80)
    assert max(len(line) for line in shown.splitlines()) <= 80, shown
    for step in ("train", "prep"):
        for field in ("cpus", "memory", "timeout"):
            assert re.search(rf"^{step} +{field} ", shown, re.MULTILINE), f"{step} {field} broken in:\n{shown}"
    piped = _cli("resources", "suggest", "pipeline.yaml", cwd=tmp_path).stdout
    row = r"^train +memory +auto +2560MB +3 +30 +1900 MB +1900 MB +0 +p95 1900 MB \+ 20%"
    assert re.search(row, piped, re.MULTILINE), piped
    assert "3 past runs" in piped, piped


def _command_paths() -> list[list[str]]:
    def walk(command: object, path: list[str]) -> list[list[str]]:
        below = getattr(command, "commands", {})
        return [path] + [p for name, sub in sorted(below.items()) for p in walk(sub, [*path, name])]

    return walk(typer.main.get_command(app), [])


# Every command's --help at 80 columns, from one process (thirty processes would take half a minute).
HELP_ALL = """
import sys
from dagflow.cli import main
for path in sys.argv[1:]:
    sys.argv = ["dagflow", *path.split(), "--help"]
    print("\\x00" + path, flush=True)
    try:
        main()
    except SystemExit:
        pass
    sys.stdout.flush()
"""


@pytest.fixture(scope="module")
def helps() -> dict[str, str]:
    paths = [" ".join(path) for path in _command_paths()]
    done = subprocess.run(
        [sys.executable, "-c", HELP_ALL, *paths], env={**cli_env(), "COLUMNS": "80"}, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    pages = dict(page.split("\n", 1) for page in done.stdout.split("\x00")[1:])
    assert set(pages) == set(paths)
    return pages


def _description(page: str) -> list[str]:
    """The prose under `Usage:`, up to the first panel."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:")) + 1
    end = next((i for i, line in enumerate(lines) if line.startswith("╭")), len(lines))
    return [line.strip() for line in lines[start:end]]


@pytest.mark.slow
def test_help_paragraphs_flow_at_80_columns(helps: dict[str, str]) -> None:
    """A line of prose ends only where the next word would not fit (78 cells inside rich's margins)."""
    ragged = []
    for path, page in helps.items():
        lines = _description(page)
        for line, after in itertools.pairwise(lines):
            if line and after and len(line) + 1 + len(after.split()[0]) <= 78:
                ragged.append(f"dagflow {path}: {line!r} then {after!r}")
    assert not ragged, "\n".join(ragged)


def test_help_shows_bracketed_text_as_written(helps: dict[str, str]) -> None:
    """`[default: ...]` in a help string is rich markup to typer: it must show, not vanish."""
    shown = {path: " ".join(re.sub("[│╭╮╰╯─]", " ", page).split()) for path, page in helps.items()}
    assert "Run id [default: the latest run]." in shown["status"]
    assert "(repeatable) [default: .dagflow/runs here and beside the pipeline file]." in shown["resources suggest"]
    assert "[default: RUN_DIR/report.html]" in shown["report"]
