"""A search database whose rows hold valid JSON of the wrong shape, or values of the wrong type (SQLite
stores any type in any column): `search run`, `search status` and `report --search` end with exit 2 and
a message naming the database file, the trial and the column, never a traceback."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from test_local_support import cli_env
from test_search_scheduler_support import write_pipeline

BUDGET = 2


@pytest.fixture(scope="module")
def finished_search(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real search of BUDGET trials, run to its end once; each test damages a copy."""
    directory = tmp_path_factory.mktemp("search")
    write_pipeline(directory, budget=BUDGET, parallel=1, optimizer="random")
    done = cli("search", "run", "pipeline.yaml", cwd=directory)
    assert done.returncode == 0, done.stdout + done.stderr
    return directory


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    # the timeout only keeps a regression from hanging the suite; nothing here measures time
    return subprocess.run(
        [sys.executable, "-m", "dagflow", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("assignment", "message", "shown_by_status"),
    [
        (
            """params = '{"y": 1}'""",
            "params {\"y\": 1} is not a point of the search's space (missing parameter(s): x, k, mode; "
            "unknown parameter(s): y)",
            True,
        ),
        (
            """params = '{"x": "abc", "k": 1, "mode": "a"}'""",
            "params {\"x\": \"abc\", \"k\": 1, \"mode\": \"a\"} is not a point of the search's space",
            True,
        ),
        ("value = 'abc', loss = 'abc'", "value is 'abc', not a finite number", False),
        ("""outputs = '{"c": "x"}'""", "outputs['c'] is 'x', not a finite number", False),
        ("state = 'bogus'", "state is 'bogus', not one of submitting, running, stopping, succeeded", False),
        ("finished = 'late'", "finished is 'late', not a time (a number of seconds)", False),
    ],
    ids=["params-keys", "params-type", "value-text", "outputs-text", "state", "finished-text"],
)
def test_a_damaged_row_is_a_clear_error_naming_the_file_and_trial(
    finished_search: Path, tmp_path: Path, assignment: str, message: str, shown_by_status: bool
) -> None:
    directory = tmp_path / "search"
    shutil.copytree(finished_search, directory)
    db = directory / ".dagflow" / "search.db"
    with sqlite3.connect(db) as connection:
        connection.execute(f"UPDATE trials SET {assignment} WHERE number = 1")
    (directory / "pipeline.yaml").write_text(
        (directory / "pipeline.yaml").read_text().replace(f"budget: {BUDGET}", f"budget: {BUDGET + 1}")
    )
    expected = f"search 'quad' trial 1: {message}"
    for args in (("search", "run", "pipeline.yaml"), ("search", "status", "quad", "--no-plot"),
                 ("report", "--search", "quad")):  # fmt: skip
        done = cli(*args, cwd=directory)
        assert "Traceback" not in done.stderr, (args, done.stderr[-3000:])
        if shown_by_status and args[0:2] != ("search", "run"):
            assert done.returncode == 0, (args, done.stderr)  # shown as recorded; only the scheduler needs a point
            continue
        assert done.returncode == 2, (args, done.stdout[-2000:], done.stderr[-2000:])
        errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1, (args, done.stderr[-1000:])
        named, rest = errors[0].removeprefix("error: ").split(": ", 1)
        assert (directory / named).resolve() == db.resolve() and rest.startswith(expected), (args, errors[0])
