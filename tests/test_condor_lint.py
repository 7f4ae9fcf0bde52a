"""dagflow lint on hand-written broken DAGs: each problem is found and located as file:line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.lint import lint_dag, parse_vars
from tests.condor_helpers import write

SUBMIT = 'executable = /usr/bin/env\narguments = "$(DagflowArgs)"\nqueue\n'


def dag(tmp_path: Path, body: str, submit: bool = True) -> Path:
    if submit:
        write(tmp_path / "a.sub", SUBMIT)
    return write(tmp_path / "x.dag", body)


def problems(path: Path) -> list[tuple[int, str]]:
    return [(p.line, p.message) for p in lint_dag(path) if p.severity == "error"]


def test_a_good_dag_is_clean(tmp_path: Path) -> None:
    path = dag(
        tmp_path,
        "# comment\nJOB a a.sub\nJOB b a.sub DIR .\nVARS a DagflowArgs=\"'x' '$(DOLLAR)$$ y'\"\n"
        "RETRY a 2 UNLESS-EXIT 3\nPRIORITY a 4\nCATEGORY b gpu\nMAXJOBS gpu 2\nPARENT a CHILD b\n"
        "NODE_STATUS_FILE s 60\nJOBSTATE_LOG j\nDOT d DONT-UPDATE OVERWRITE\n",
    )
    assert lint_dag(path) == []


def test_missing_submit_file(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a missing.sub\n")
    [(line, message)] = problems(path)
    assert line == 1 and "does not exist" in message


def test_submit_file_that_does_not_parse(tmp_path: Path) -> None:
    write(tmp_path / "bad.sub", "this is not a submit command\nqueue\n")
    [(line, message)] = problems(dag(tmp_path, "JOB a bad.sub\n", submit=False))
    assert line == 1 and "does not parse" in message


def test_undefined_parent(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a a.sub\nPARENT ghost CHILD a\n")
    [(line, message)] = problems(path)
    assert line == 2 and "'ghost'" in message


def test_node_used_before_it_is_defined(tmp_path: Path) -> None:
    path = dag(tmp_path, 'VARS a x="1"\nJOB a a.sub\n')
    assert problems(path)[0][0] == 1


def test_cycle(tmp_path: Path) -> None:
    path = dag(
        tmp_path, "JOB a a.sub\nJOB b a.sub\nJOB c a.sub\nPARENT a CHILD b\nPARENT b CHILD c\nPARENT c CHILD a\n"
    )
    [(line, message)] = problems(path)
    assert line == 6 and message.startswith("cycle:") and "a" in message


def test_unused_category(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a a.sub\nMAXJOBS gpu 4\n")
    [(line, message)] = problems(path)
    assert line == 2 and "'gpu'" in message


def test_htcondor2_dags_style_category_line_is_caught(tmp_path: Path) -> None:
    # htcondor2.dags writes the throttle as `CATEGORY gpu 4`: DAGMan reads a node named gpu.
    path = dag(tmp_path, "JOB a a.sub\nCATEGORY a gpu\nCATEGORY gpu 4\n")
    [(line, message)] = problems(path)
    assert line == 3 and "'gpu'" in message


@pytest.mark.parametrize(
    ("vars_text", "expected"),
    [
        ("x=unquoted", 'macroname="value"'),
        ('x="unterminated', 'macroname="value"'),
        ('x="bad \\n escape"', "unknown escape"),
        ('x="a"y="b"', 'macroname="value"'),
        ('queue_x="1"', "queue"),
        ('x="$(ENV(HOME))"', "'$'"),
        ('x="one "two""', 'macroname="value"'),
    ],
)
def test_bad_vars_quoting(tmp_path: Path, vars_text: str, expected: str) -> None:
    path = dag(tmp_path, f"JOB a a.sub\nVARS a {vars_text}\n")
    [(line, message)] = problems(path)
    assert line == 2 and expected in message


def test_vars_unescaping() -> None:
    pairs, problem = parse_vars(r'a="say \"hi\" \\ back" b="" c="$(DOLLAR)"')
    assert problem is None
    assert pairs == [("a", 'say "hi" \\ back'), ("b", ""), ("c", "$(DOLLAR)")]


def test_unknown_keyword_and_bad_numbers(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a a.sub\nJOBS b a.sub\nRETRY a many\nPRIORITY a\nMAXJOBS c 0\n")
    lines = [line for line, _ in problems(path)]
    assert lines == [2, 3, 4, 5]


def test_always_update_on_a_big_dag_is_a_warning(tmp_path: Path) -> None:
    body = "".join(f"JOB n{i} a.sub\n" for i in range(10_001)) + "NODE_STATUS_FILE s 60 ALWAYS-UPDATE\n"
    found = lint_dag(dag(tmp_path, body))
    assert [(p.severity, p.line) for p in found] == [("warning", 10_002)]


def test_cli_exit_codes_and_located_messages(tmp_path: Path) -> None:
    runner = CliRunner()
    dag(tmp_path, "JOB a a.sub\nPARENT a CHILD ghost\n")
    result = runner.invoke(app, ["lint", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'x.dag'}:2: error:" in result.output
    (tmp_path / "x.dag").write_text("JOB a a.sub\n")
    result = runner.invoke(app, ["lint", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["lint", str(tmp_path / "empty-dir-that-is-missing")]).exit_code == 2
