"""The search scheduler's durable state: one SQLite file (default `.dagflow/search.db`) for every search.

    searches(name PK, kind, source, fingerprint, config JSON, seed, budget, parallel, created, uid)
    trials(search, region, number, params JSON, state, engine, run_id UNIQUE, handle, value, loss,
           error, created, submitted, finished, deadline, outputs JSON, step; PK (search, region, number))

`outputs` holds a succeeded trial's constraint values ({name: value}; NULL without constraints).
A succeeded trial without a value is a Spearmint job that completed with a NaN objective: HIPS Spearmint's
infeasible point (nan_objective), counted as completed, never the best, and modelled as an implicit
constraint by the optimiser (gp_ei.py). `value` and `loss` are never NaN themselves (SQLite stores NaN as
NULL, and a NULL in a failed trial means "no value").
`step` is the last intermediate step a trial reported when early stopping stopped it (NULL otherwise).

Early stopping records its decision first: one guarded UPDATE moves the running trial to `stopping`
with its last value, loss, step and the reason; only then is its run cancelled, and the trial moved
from `stopping` to `stopped`. A scheduler killed in between finds the trial `stopping` on restart and
finishes the stop (cancel again, record it stopped): the trial is never restarted nor counted twice.

A trial row is written (state `submitting`, with its params and run id) and committed before the
engine hears of it, its engine handle afterwards (state `running`), and its end in one guarded
UPDATE that only moves a trial out of `submitting`/`running`, so a result is recorded at most once.
The file runs in WAL mode with synchronous=FULL: a committed transaction survives kill -9 of the
scheduler and a crash of the machine. A search's `uid` is random and made once: its trial runs record
it (ownership.py), so another database's search of the same name never adopts them.
"""

from __future__ import annotations

import contextlib
import json
import math
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dagflow.bounded import BoundedInputError, loads_json
from dagflow.errors import DagflowError

DEFAULT_DB = Path(".dagflow") / "search.db"

SUBMITTING = "submitting"
RUNNING = "running"
SUCCEEDED = "succeeded"
FAILED = "failed"
CANCELLED = "cancelled"  # stopped by Ctrl-C: no result, not counted against the budget
STOPPING = "stopping"  # early stopping decided to stop it; its run is being cancelled
STOPPED = "stopped"  # stopped early: its last intermediate value is its result
IN_FLIGHT = (SUBMITTING, RUNNING, STOPPING)
STATES = (SUBMITTING, RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED, CANCELLED)
COUNTED = (SUBMITTING, RUNNING, STOPPING, SUCCEEDED, FAILED, STOPPED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS searches (
    name        TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    source      TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    config      TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    budget      INTEGER NOT NULL,
    parallel    INTEGER NOT NULL,
    created     REAL NOT NULL,
    uid         TEXT
);
CREATE TABLE IF NOT EXISTS trials (
    search    TEXT NOT NULL REFERENCES searches(name),
    region    TEXT NOT NULL,
    number    INTEGER NOT NULL,
    params    TEXT NOT NULL,
    state     TEXT NOT NULL,
    engine    TEXT NOT NULL,
    run_id    TEXT NOT NULL UNIQUE,
    handle    TEXT,
    value     REAL,
    loss      REAL,
    error     TEXT,
    created   REAL NOT NULL,
    submitted REAL,
    finished  REAL,
    deadline  REAL NOT NULL,
    outputs   TEXT,
    step      INTEGER,
    PRIMARY KEY (search, region, number)
);
CREATE INDEX IF NOT EXISTS trials_state ON trials (search, state);
"""


class SearchStoreError(DagflowError):
    pass


@dataclass(frozen=True, slots=True)
class SearchRecord:
    name: str
    kind: str  # pipeline | spearmint
    source: str
    fingerprint: str
    config: dict[str, Any]
    seed: int
    budget: int
    parallel: int
    created: float
    uid: str  # this database's id for the search, recorded in its trial runs


@dataclass(frozen=True, slots=True)
class Trial:
    search: str
    region: str  # "" when the search is not per region
    number: int
    params: dict[str, Any]
    state: str
    engine: str
    run_id: str
    handle: str | None
    value: float | None
    loss: float | None
    error: str | None
    created: float
    submitted: float | None
    finished: float | None
    deadline: float
    outputs: dict[str, float] | None = None  # constraint values of a succeeded trial
    step: int | None = None  # the last step a trial stopped early had reported

    @property
    def label(self) -> str:
        return f"t{self.number}" + (f" {self.region}" if self.region else "")


def nan_objective(trial: Trial) -> bool:
    """A trial that completed with a NaN objective: infeasible, as HIPS Spearmint has it (not a failure)."""
    return trial.state == SUCCEEDED and trial.value is None


def feasible(trial: Trial) -> bool:
    """Every constraint value >= 0 (Spearmint's convention) and, for a succeeded trial, an objective that is
    a number (a NaN objective is infeasible); a trial without constraints is feasible."""
    return not nan_objective(trial) and all(value >= 0 for value in (trial.outputs or {}).values())


def best_trial(trials: Iterable[Trial]) -> Trial | None:
    """The feasible successful trial with the lowest loss (the earliest on a tie), or None."""
    done = [trial for trial in trials if trial.state == SUCCEEDED and trial.loss is not None and feasible(trial)]
    return min(done, key=lambda t: (t.loss, t.number)) if done else None


def trial_run_id(search: str, number: int, region: str) -> str:
    return f"{search}-t{number}" + (f"-{region}" if region else "")


class SearchStore:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._trials_read: dict[tuple[str, str | None], tuple[tuple[int, int], tuple[Trial, ...]]] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # autocommit mode: every transaction below is explicit
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)  # idempotent: IF NOT EXISTS
            self._add_uids()
        except sqlite3.DatabaseError as error:
            raise SearchStoreError(f"{self.path}: not a usable search database ({error})") from None

    def close(self) -> None:
        self._db.close()

    def _add_uids(self) -> None:
        """Databases written before searches had a uid: add the column and give each search one."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(searches)")}
        trial_columns = {row[1] for row in self._db.execute("PRAGMA table_info(trials)")}
        with self.transaction() as db:
            if "outputs" not in trial_columns:  # databases written before constraints
                db.execute("ALTER TABLE trials ADD COLUMN outputs TEXT")
            if "step" not in trial_columns:  # databases written before early stopping
                db.execute("ALTER TABLE trials ADD COLUMN step INTEGER")
            if "uid" not in columns:
                db.execute("ALTER TABLE searches ADD COLUMN uid TEXT")
            for (name,) in db.execute("SELECT name FROM searches WHERE uid IS NULL").fetchall():
                db.execute("UPDATE searches SET uid = ? WHERE name = ?", (secrets.token_hex(8), name))

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT: takes the write lock up front, so read-then-write is atomic. A write
        that cannot be made (a full disk) changes nothing and is one SearchStoreError: what it would have
        recorded is done again by the same command once there is room (trials in flight stay in flight)."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.OperationalError as error:
            if self._db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute("ROLLBACK")
            hint = "; free some space, then run the same command again: the search goes on where it stopped"
            raise SearchStoreError(
                f"{self.path}: cannot write the search database ({error}){hint if 'full' in str(error) else ''}"
            ) from None

    # -- searches ------------------------------------------------------------------------------------

    def open_search(
        self,
        name: str,
        kind: str,
        source: str,
        fingerprint: str,
        config: Mapping[str, Any],
        seed: int,
        budget: int,
        parallel: int,
    ) -> SearchRecord:
        """Create the search, or continue it: what a trial means (the fingerprint) must not have
        changed; budget and parallel may (raise the budget to extend a finished search)."""
        with self.transaction() as db:
            row = db.execute("SELECT * FROM searches WHERE name = ?", (name,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO searches (name, kind, source, fingerprint, config, seed, budget, parallel, created,"
                    " uid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, kind, source, fingerprint, json.dumps(dict(config)), seed, budget, parallel, time.time(),
                     secrets.token_hex(8)),
                )  # fmt: skip
            elif row["fingerprint"] != fingerprint or row["kind"] != kind:
                raise SearchStoreError(
                    f"search {name!r} in {self.path} was started from {row['source']} with other variables, "
                    "objective, optimiser or regions, so it cannot be continued with this one; start a new "
                    "search with another --name (its trials are new runs; the old search's runs are never reused)"
                )
            else:
                db.execute(
                    "UPDATE searches SET budget = ?, parallel = ?, source = ?, config = ? WHERE name = ?",
                    (budget, parallel, source, json.dumps(dict(config)), name),
                )
        record = self.search(name)
        assert record is not None
        return record

    def search(self, name: str) -> SearchRecord | None:
        row = self._db.execute("SELECT * FROM searches WHERE name = ?", (name,)).fetchone()
        if row is None:
            return None
        where = f"search {name!r}"
        return SearchRecord(
            **_columns(self.path, where, row, _SEARCH_COLUMNS),
            config=_json_of(self.path, where, "config", row["config"], dict),
        )

    def search_names(self) -> list[str]:
        return [row[0] for row in self._db.execute("SELECT name FROM searches ORDER BY created")]

    # -- trials --------------------------------------------------------------------------------------

    def add_trial(self, search: str, region: str, params: Mapping[str, Any], engine: str, timeout_s: float) -> Trial:
        """Number, name and record a new trial (state submitting) in one transaction."""
        return self.add_trials(search, region, [params], engine, timeout_s)[0]

    def add_trials(
        self, search: str, region: str, points: Sequence[Mapping[str, Any]], engine: str, timeout_s: float
    ) -> list[Trial]:
        """Number, name and record new trials (state submitting), all in one transaction: the points of one
        suggestion are recorded whole or not at all."""
        now = time.time()
        with self.transaction() as db:
            (last,) = db.execute(
                "SELECT COALESCE(MAX(number), 0) FROM trials WHERE search = ? AND region = ?", (search, region)
            ).fetchone()
            numbers = range(last + 1, last + 1 + len(points))
            db.executemany(
                "INSERT INTO trials (search, region, number, params, state, engine, run_id, created, deadline) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(search, region, number, json.dumps(dict(params)), SUBMITTING, engine,
                  trial_run_id(search, number, region), now, now + timeout_s)
                 for number, params in zip(numbers, points, strict=True)],
            )  # fmt: skip
        return [self.trial(search, region, number) for number in numbers]

    def set_run_id(self, trial: Trial, run_id: str) -> Trial:
        """Give a trial that is still submitting another run id (its own was taken by another run)."""
        with self.transaction() as db:
            db.execute(
                "UPDATE trials SET run_id = ? WHERE search = ? AND region = ? AND number = ? AND state = ?",
                (run_id, trial.search, trial.region, trial.number, SUBMITTING),
            )
        return self.trial(trial.search, trial.region, trial.number)

    def mark_submitted(self, trial: Trial, handle: str | None) -> Trial:
        with self.transaction() as db:
            db.execute(
                "UPDATE trials SET state = ?, handle = COALESCE(?, handle), submitted = COALESCE(submitted, ?) "
                "WHERE search = ? AND region = ? AND number = ? AND state = ?",
                (RUNNING, handle, time.time(), trial.search, trial.region, trial.number, SUBMITTING),
            )
        return self.trial(trial.search, trial.region, trial.number)

    def finish(
        self,
        trial: Trial,
        state: str,
        value: float | None = None,
        loss: float | None = None,
        error: str | None = None,
        outputs: Mapping[str, float] | None = None,
    ) -> bool:
        """Record a trial's end; False (and nothing written) when it had already ended."""
        stored = json.dumps(dict(outputs)) if outputs is not None else None
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE trials SET state = ?, value = ?, loss = ?, error = ?, finished = ?, outputs = ? "
                "WHERE search = ? AND region = ? AND number = ? AND state IN (?, ?)",
                (state, value, loss, error, time.time(), stored, trial.search, trial.region, trial.number,
                 SUBMITTING, RUNNING),
            )  # fmt: skip
            return cursor.rowcount == 1

    def mark_stopping(self, trial: Trial, value: float, loss: float, step: int, reason: str) -> bool:
        """Record the decision to stop a running trial early; False (nothing written) when it is not running."""
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE trials SET state = ?, value = ?, loss = ?, step = ?, error = ? "
                "WHERE search = ? AND region = ? AND number = ? AND state = ?",
                (STOPPING, value, loss, step, reason, trial.search, trial.region, trial.number, RUNNING),
            )
            return cursor.rowcount == 1

    def finish_stopping(self, trial: Trial) -> bool:
        """A stopping trial's run was cancelled: record it stopped; False when it already was."""
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE trials SET state = ?, finished = ? "
                "WHERE search = ? AND region = ? AND number = ? AND state = ?",
                (STOPPED, time.time(), trial.search, trial.region, trial.number, STOPPING),
            )
            return cursor.rowcount == 1

    def unstop(self, trial: Trial) -> bool:
        """A stopping trial whose run had already completed (the lines the decision read arrived after the job
        ended): back to running, the decision forgotten, for the scheduler to record how it ended; False when
        it is not stopping. A finished trial is never recorded stopped."""
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE trials SET state = ?, value = NULL, loss = NULL, step = NULL, error = NULL "
                "WHERE search = ? AND region = ? AND number = ? AND state = ?",
                (RUNNING, trial.search, trial.region, trial.number, STOPPING),
            )
            return cursor.rowcount == 1

    def trials(self, search: str, region: str | None = None) -> list[Trial]:
        # A scheduler asks about ten times per trial; the rows are read again only when the database may have
        # changed since the last read of the same ones. Nothing read inside a transaction is kept: a rollback
        # takes back rows without moving the stamp.
        stamp = self._stamp()
        kept = self._trials_read.get((search, region))
        if kept is not None and kept[0] == stamp:
            return list(kept[1])
        query = "SELECT * FROM trials WHERE search = ?"
        args: tuple[Any, ...] = (search,)
        if region is not None:
            query += " AND region = ?"
            args += (region,)
        trials = [_trial_of(self.path, row) for row in self._db.execute(query + " ORDER BY region, number", args)]
        if not self._db.in_transaction:
            self._trials_read[(search, region)] = (stamp, tuple(trials))
        return trials

    def _stamp(self) -> tuple[int, int]:
        """What moves whenever the database may have changed: `data_version` with every commit of another
        connection (another process's included), total_changes with every row this connection writes."""
        return self._db.execute("PRAGMA data_version").fetchone()[0], self._db.total_changes

    def damaged(self, trial: Trial, problem: str) -> SearchStoreError:
        """The error for a trial row whose content the caller found unusable."""
        return SearchStoreError(f"{self.path}: {trial_label(trial.search, trial.region, trial.number)}: {problem}")

    def trial(self, search: str, region: str, number: int) -> Trial:
        row = self._db.execute(
            "SELECT * FROM trials WHERE search = ? AND region = ? AND number = ?", (search, region, number)
        ).fetchone()
        return _trial_of(self.path, row)


def trial_label(search: str, region: str, number: object) -> str:
    """How errors name a trial: `search 'quad' trial 3` (`... of region 'us'`)."""
    return f"search {search!r} trial {number}" + (f" of region {region!r}" if region else "")


def _json_of(path: Path, where: str, column: str, text: object, kind: type) -> Any:
    """A JSON column's value; a clear error naming the file, the row and the column when it is damaged."""
    try:
        value = loads_json(text) if isinstance(text, str | bytes) else None
    except BoundedInputError as error:
        raise SearchStoreError(f"{path}: {where}: {column} is not valid JSON ({error})") from None
    if not isinstance(value, kind):
        raise SearchStoreError(f"{path}: {where}: {column} is {text!r}, not a JSON {kind.__name__}")
    return value


def _is_integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def _is_finite(value: object) -> bool:
    return _is_time(value) and math.isfinite(value)  # type: ignore[arg-type]


# SQLite keeps any type in any column: what each kind of column must hold to be read, and how to say so.
_KINDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "text": (lambda value: isinstance(value, str), "text"),
    "integer": (_is_integer, "an integer"),
    "time": (_is_time, "a time (a number of seconds)"),
    "finite": (_is_finite, "a finite number"),
    "state": (lambda value: value in STATES, f"one of {', '.join(STATES)}"),
}
# column -> (kind, whether NULL is allowed)
_SEARCH_COLUMNS = {
    "name": ("text", False), "kind": ("text", False), "source": ("text", False), "fingerprint": ("text", False),
    "seed": ("integer", False), "budget": ("integer", False), "parallel": ("integer", False),
    "created": ("time", False), "uid": ("text", False),
}  # fmt: skip
_TRIAL_COLUMNS = {
    "search": ("text", False), "region": ("text", False), "number": ("integer", False), "state": ("state", False),
    "engine": ("text", False), "run_id": ("text", False), "handle": ("text", True), "value": ("finite", True),
    "loss": ("finite", True), "error": ("text", True), "created": ("time", False), "submitted": ("time", True),
    "finished": ("time", True), "deadline": ("time", False), "step": ("integer", True),
}  # fmt: skip


def _columns(path: Path, where: str, row: sqlite3.Row, columns: Mapping[str, tuple[str, bool]]) -> dict[str, Any]:
    """The row's plain columns by name, each checked against its kind."""
    values: dict[str, Any] = {}
    for column, (kind, nullable) in columns.items():
        value = row[column]
        fits, wanted = _KINDS[kind]
        if not (fits(value) or (nullable and value is None)):
            raise SearchStoreError(f"{path}: {where}: {column} is {value!r}, not {wanted}")
        values[column] = value
    return values


def _outputs(path: Path, where: str, text: object) -> dict[str, float] | None:
    if text is None:
        return None
    outputs = _json_of(path, where, "outputs", text, dict)
    for name, value in outputs.items():
        if not _is_finite(value):
            raise SearchStoreError(f"{path}: {where}: outputs[{name!r}] is {value!r}, not a finite number")
    return outputs


def _trial_of(path: Path, row: sqlite3.Row) -> Trial:
    where = trial_label(row["search"], row["region"], row["number"])
    return Trial(
        **_columns(path, where, row, _TRIAL_COLUMNS),
        params=_json_of(path, where, "params", row["params"], dict),
        outputs=_outputs(path, where, row["outputs"]),
    )
