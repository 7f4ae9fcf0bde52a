"""dagflow lint's own parser (no HTCondor needed): DAGMan syntax it must accept, broken DAGs it must
catch, each problem located as file:line. tests/test_condor_dag_checker.py holds HTCondor's verdicts."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagflow.cli import app
from dagflow.engines.condor.lint import CHECKER_ENV, DAGFLOW_HEADER, find_checker, lint_dag, parse_vars, run_checker
from tests.condor_helpers import write

SUBMIT = 'executable = /usr/bin/env\narguments = "$(DagflowArgs)"\nqueue\n'
DAGS = Path(__file__).resolve().parent / "data" / "dags"
# tests/data/dags/invalid/<name>.dag -> (line, words of the message)
INVALID = {
    "illegal_node_name": (2, "illegal character"),
    "reserved_node_name": (1, "reserved word"),
    "missing_subdag": (1, "does not exist"),
    "undefined_node": (2, "'ghost'"),
    "cycle": (4, "cycle: a -> b -> a"),
    "unknown_command": (2, "'JOBS'"),
    "unclosed_inline": (1, "not closed"),
    "vars_queue_macro": (2, "'queue'"),
}


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


def test_node_defined_further_down_is_fine(tmp_path: Path) -> None:
    # DAGMan applies node commands once every node is read
    assert problems(dag(tmp_path, 'VARS a x="1"\nPARENT a CHILD b\nJOB a a.sub\nJOB b a.sub\n')) == []


def test_node_never_defined(tmp_path: Path) -> None:
    path = dag(tmp_path, 'VARS a x="1"\nJOB b a.sub\n')
    [(line, message)] = problems(path)
    assert line == 1 and "'a'" in message


@pytest.mark.parametrize("path", sorted((DAGS / "valid").glob("*.dag")), ids=lambda path: path.stem)
def test_valid_dagman_constructs_are_accepted(path: Path) -> None:
    assert lint_dag(path) == []


@pytest.mark.parametrize(("name", "expected"), INVALID.items())
def test_dags_dagman_rejects_are_caught(name: str, expected: tuple[int, str]) -> None:
    [(line, message)] = problems(DAGS / "invalid" / f"{name}.dag")
    assert (line, expected[1] in message) == (expected[0], True), message


def test_every_invalid_fixture_has_an_expectation() -> None:
    assert {path.stem for path in (DAGS / "invalid").glob("*.dag")} == set(INVALID)


def test_a_file_a_pre_script_may_write_is_only_a_warning(tmp_path: Path) -> None:
    path = dag(tmp_path, "SUBDAG EXTERNAL s later.dag\nSCRIPT PRE s make-it.sh\nJOB a later.sub\nSCRIPT PRE a x.sh\n")
    found = lint_dag(path)
    assert [(p.severity, p.line) for p in found] == [("warning", 1), ("warning", 3)]


def test_cycle(tmp_path: Path) -> None:
    path = dag(
        tmp_path, "JOB a a.sub\nJOB b a.sub\nJOB c a.sub\nPARENT a CHILD b\nPARENT b CHILD c\nPARENT c CHILD a\n"
    )
    [(line, message)] = problems(path)
    assert line == 6 and message.startswith("cycle:") and "a" in message


def test_unused_category(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a a.sub\nMAXJOBS gpu 4\n")
    # DAGMan accepts a throttle nothing uses, so it is a warning
    [problem] = lint_dag(path)
    assert (problem.line, problem.severity) == (2, "warning") and "'gpu'" in problem.message


def test_htcondor2_dags_style_category_line_is_caught(tmp_path: Path) -> None:
    # htcondor2.dags writes the throttle as `CATEGORY gpu 4`, which DAGMan refuses.
    path = dag(tmp_path, "JOB a a.sub\nCATEGORY a gpu\nCATEGORY gpu 4\n")
    [(line, message)] = problems(path)
    assert line == 3 and "CATEGORY" in message


@pytest.mark.parametrize(
    ("vars_text", "expected"),
    [
        ("x=unquoted", 'macroname="value"'),
        ('x="unterminated', "quoting"),
        ('x="bad \\n escape"', "unknown escape"),
        ('x="a"y="b"', 'macroname="value"'),
        ('queue_x="1"', "queue"),
        ('x="$(ENV(HOME))"', "'$'"),
        ('x="one "two""', 'macroname="value"'),
    ],
)
def test_bad_vars_quoting_in_a_dagflow_dag(tmp_path: Path, vars_text: str, expected: str) -> None:
    path = dag(tmp_path, f"{DAGFLOW_HEADER}\nJOB a a.sub\nVARS a {vars_text}\n")
    [(line, message)] = problems(path)
    assert line == 3 and expected in message


@pytest.mark.parametrize(
    "vars_text", ["x=unquoted", 'x = "spaced"', 'x="$(JOB)"', 'x="$(ENV(HOME))"', "x='single'", 'x="bad \\n"']
)
def test_dagman_vars_syntax_is_fine_in_a_dag_dagflow_did_not_write(tmp_path: Path, vars_text: str) -> None:
    assert problems(dag(tmp_path, f"JOB a a.sub\nVARS a {vars_text}\n")) == []


def test_vars_unescaping() -> None:
    pairs, problem = parse_vars(r'a="say \"hi\" \\ back" b="" c="$(DOLLAR)"')
    assert problem is None
    assert pairs == [("a", 'say "hi" \\ back'), ("b", ""), ("c", "$(DOLLAR)")]


def test_unknown_keyword_and_bad_numbers(tmp_path: Path) -> None:
    path = dag(tmp_path, "JOB a a.sub\nJOBS b a.sub\nRETRY a many\nPRIORITY a\nMAXJOBS c x\n")
    lines = [line for line, _ in problems(path)]
    assert lines == [2, 3, 4, 5]


def test_always_update_on_a_big_dag_is_a_warning(tmp_path: Path) -> None:
    body = "".join(f"JOB n{i} a.sub\n" for i in range(10_001)) + "NODE_STATUS_FILE s 60 ALWAYS-UPDATE\n"
    found = lint_dag(dag(tmp_path, body))
    assert [(p.severity, p.line) for p in found] == [("warning", 10_002)]


def test_cli_exit_codes_and_located_messages(tmp_path: Path) -> None:
    runner = CliRunner()
    dag(tmp_path, "JOB a a.sub\nPARENT a CHILD ghost\n")
    result = runner.invoke(app, ["lint", "--no-dag-checker", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{tmp_path / 'x.dag'}:2: error:" in result.output
    (tmp_path / "x.dag").write_text("JOB a a.sub\n")
    result = runner.invoke(app, ["lint", "--no-dag-checker", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "dagflow's parser" in result.output
    assert runner.invoke(app, ["lint", str(tmp_path / "empty-dir-that-is-missing")]).exit_code == 2


def test_find_checker_prefers_the_option_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CHECKER_ENV, "/from/env")
    assert find_checker("/given") == Path("/given")
    assert find_checker() == Path("/from/env")
    monkeypatch.delenv(CHECKER_ENV)
    monkeypatch.setenv("PATH", "/nonexistent")
    assert find_checker() is None


def fake_checker(tmp_path: Path, stdout: str, code: int) -> Path:
    script = write(tmp_path / "fake_checker", f"#!/bin/sh\ncat <<'EOF'\n{stdout}\nEOF\nexit {code}\n")
    script.chmod(0o755)
    return script


def test_checker_json_becomes_located_problems(tmp_path: Path) -> None:
    report = (
        '[{"DagFile": "/d/x.dag", "IsCyclic": true, "DetectedCycle": "a -> b -> a", "Errors": '
        '[{"Reason": "Node name is a reserved word", "DagCommand": "JOB", "SourceFile": "inc.dag", "SourceLine": 3}]}]'
    )
    found = run_checker(fake_checker(tmp_path, report, 1), [tmp_path / "x.dag"])
    assert [p.render() for p in found] == [
        "/d/inc.dag:3: error: JOB: Node name is a reserved word",
        "/d/x.dag: error: cycle: a -> b -> a",
    ]


def test_a_checker_that_fails_is_reported_not_ignored(tmp_path: Path) -> None:
    [problem] = run_checker(fake_checker(tmp_path, "no config found", 2), [tmp_path / "x.dag"])
    assert "failed: no config found" in problem.message
