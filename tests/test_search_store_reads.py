"""SearchStore.trials keeps what it read while the database is unchanged (a scheduler asks about ten times per
trial), and never answers from that once anything may have changed it: this connection's own writes, another
connection's or another process's commits, a transaction rolled back."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dagflow.search.store import RUNNING, SearchStore, SearchStoreError


def store_with_trials(path: Path, count: int = 3) -> SearchStore:
    store = SearchStore(path)
    store.open_search("s", "pipeline", "pipeline.yaml", "f", {}, 1, 10, 1)
    store.add_trials("s", "", [{"x": float(number)} for number in range(count)], "local", 60.0)
    return store


def states(store: SearchStore) -> list[str]:
    return [trial.state for trial in store.trials("s")]


def test_an_unchanged_database_is_not_read_again(tmp_path: Path) -> None:
    store = store_with_trials(tmp_path / "search.db")
    first = store.trials("s")
    rows_read = []
    store._db.set_trace_callback(rows_read.append)
    assert store.trials("s") == first
    assert not [statement for statement in rows_read if "FROM trials" in statement]


def test_its_own_writes_are_seen(tmp_path: Path) -> None:
    store = store_with_trials(tmp_path / "search.db")
    trial = store.trials("s")[0]
    store.mark_submitted(trial, "job")
    assert states(store)[0] == RUNNING


def test_another_connections_commit_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    store = store_with_trials(path)
    before = states(store)
    other = SearchStore(path)
    other.mark_submitted(other.trials("s")[1], "job")
    other.close()
    assert states(store) == [before[0], RUNNING, before[2]]
    raw = sqlite3.connect(path)
    raw.execute("DELETE FROM trials WHERE number = 3")
    raw.commit()
    raw.close()
    assert [trial.number for trial in store.trials("s")] == [1, 2]


def test_another_processs_commit_is_seen(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    store = store_with_trials(path)
    assert len(store.trials("s")) == 3
    script = textwrap.dedent(f"""
        from dagflow.search.store import SearchStore
        store = SearchStore({str(path)!r})
        store.add_trials("s", "", [{{"x": 9.0}}], "local", 60.0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert [trial.params for trial in store.trials("s")][-1] == {"x": 9.0}


def test_a_rolled_back_transaction_is_not_served(tmp_path: Path) -> None:
    store = store_with_trials(tmp_path / "search.db")
    before = store.trials("s")
    with pytest.raises(RuntimeError), store.transaction() as db:
        db.execute("UPDATE trials SET state = ? WHERE search = 's'", (RUNNING,))
        assert {trial.state for trial in store.trials("s")} == {RUNNING}  # read inside: its own rows
        raise RuntimeError("taken back")
    assert store.trials("s") == before


def test_a_damaged_row_is_still_refused_on_every_read(tmp_path: Path) -> None:
    path = tmp_path / "search.db"
    store = store_with_trials(path)
    raw = sqlite3.connect(path)
    raw.execute("UPDATE trials SET params = '[1' WHERE number = 2")
    raw.commit()
    raw.close()
    for _ in range(2):
        with pytest.raises(SearchStoreError):
            store.trials("s")
