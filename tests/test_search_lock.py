"""One scheduler per search and database file, however the database's path is spelled: two real
scheduler processes, the second reaching the database through a symlink (to the file, or to its
directory), never run one search side by side."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from test_search_scheduler_support import calls, start_search, trial_rows, wait_for, write_pipeline


@pytest.mark.slow
@pytest.mark.parametrize("through", ["file-symlink", "directory-symlink"])
def test_a_second_scheduler_through_a_symlink_is_refused(tmp_path: Path, through: str) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=2, parallel=2, optimizer="random")
    (pipeline.parent / "sleep.txt").write_text("60")  # the first scheduler's trials run while the second starts
    db = tmp_path / "data" / "search.db"
    first = start_search("run", str(pipeline), "--db", str(db), "--poll", "0.05", cwd=tmp_path)
    try:
        wait_for(lambda: len(calls(pipeline.parent)) == 2)  # both of its trials are running
        if through == "file-symlink":
            (tmp_path / "other.db").symlink_to(db)
            other = tmp_path / "other.db"
        else:
            (tmp_path / "elsewhere").symlink_to(db.parent, target_is_directory=True)
            other = tmp_path / "elsewhere" / "search.db"
        second = start_search("run", str(pipeline), "--db", str(other), "--poll", "0.05", cwd=tmp_path)
        try:
            _, err = second.communicate(timeout=60)  # a refusal takes a second or two; running, a minute
        except subprocess.TimeoutExpired:
            second.kill()
            second.communicate()
            pytest.fail(f"a second scheduler ran search quad through {other} beside the first one")
        assert second.returncode == 2, err
        assert f"search 'quad' is being run by another scheduler (pid {first.pid})" in err
        assert "Traceback" not in err
        assert len(trial_rows(db)) == 2 and len(calls(pipeline.parent)) == 2  # nothing of its own started
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    assert first.returncode == 130


def test_a_lock_file_that_cannot_be_made_is_a_clear_error(tmp_path: Path) -> None:
    pipeline = write_pipeline(tmp_path / "p", budget=1, parallel=1, optimizer="random")
    db = tmp_path / ("d" * 60 + ".db")  # with the search's name, the lock file's name passes 255 bytes
    second = start_search("run", str(pipeline), "--db", str(db), "--name", "q" * 200, cwd=tmp_path)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 2, err
    assert "Traceback" not in err and "cannot create the lock file" in err and "File name too long" in err
