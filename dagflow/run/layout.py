"""Where a run's files live: `<runs-dir>/<run-id>/{plan.json, journal.jsonl, procs.jsonl, logs/<node>.out|.err}`.

A pipeline's runs dir is `.dagflow/runs` beside the pipeline file, wherever the command was typed, so its
runs and cache are the same from every directory. A command given no pipeline (status, logs, ...) looks in
`./.dagflow/runs` and in the runs dirs of pipelines run from here, which `dagflow run DIR/pipeline.yaml`
notes in `./.dagflow/other-runs`.

A node's log file is created when that stream first says something: a node that printed nothing to
stderr has no `.err`. The node cache is a sibling of the runs directory (`.dagflow/cache/` beside
`.dagflow/runs/`).
"""

from __future__ import annotations

import hashlib
import os
import pwd
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dagflow.errors import DagflowError
from dagflow.files import file_stem, write_atomic
from dagflow.run.ids import validate_run_id
from dagflow.run.index import note_run

if TYPE_CHECKING:
    from dagflow.plan import Plan

DEFAULT_RUNS_DIR = Path(".dagflow") / "runs"
LATEST_FILE = "LATEST"  # holds the id of the run started most recently under a runs dir
SEARCH_TRIAL_FILE = "trial.json"  # marks a search's trial run (dagflow/search/ownership.py): never `latest`
DRY_RUN_FILE = "DRY-RUN"  # marks a run compiled by `submit --dry-run` and not submitted since: never `latest`
ENGINE_FILE = "engine"  # the name of the engine that made the run, written once (dagflow/engines/registry.py)
OTHER_RUNS_FILE = Path(".dagflow") / "other-runs"  # runs dirs of pipelines run from a directory, one per line
RUNS_DIR_HINT = (
    "runs are kept in .dagflow/runs beside their pipeline file: give the command in the pipeline's directory "
    "(or where `dagflow run` was typed), or point at them with --runs-dir DIR/.dagflow/runs"
)


class RunNotFoundError(DagflowError):
    pass


class UnreadableRunError(RunNotFoundError):
    """A run in a directory this user may not enter: another user's (one `sudo dagflow run` under umask 077)."""

    def __init__(self, run_dir: Path) -> None:
        try:
            owner = pwd.getpwuid(run_dir.stat().st_uid).pw_name
        except (OSError, KeyError):
            owner = "another user"
        super().__init__(
            f"run {run_dir.name} cannot be read by this user: {run_dir}: permission denied (it belongs to "
            f"{owner}); look at it as {owner}, or make it readable (`chmod -R a+rX {run_dir}` as {owner})"
        )


@dataclass(frozen=True, slots=True)
class RunLayout:
    runs_dir: Path
    run_id: str

    @property
    def run_dir(self) -> Path:
        return self.runs_dir / self.run_id

    @property
    def plan_path(self) -> Path:
        return self.run_dir / "plan.json"

    @property
    def journal_path(self) -> Path:
        return self.run_dir / "journal.jsonl"

    @property
    def procs_path(self) -> Path:
        """The keeper's record of node processes: starts and exits (engines/local/keeper.py)."""
        return self.run_dir / "procs.jsonl"

    @property
    def pipeline_hash_path(self) -> Path:
        """sha256 of the pipeline file the run was planned from: a resume re-plans when it changed."""
        return self.run_dir / "pipeline.sha256"

    @property
    def engine_path(self) -> Path:
        return self.run_dir / ENGINE_FILE

    def recorded_engine(self) -> str | None:
        """The engine the run was made with, as recorded at creation; None for runs made before the record."""
        try:
            return self.engine_path.read_text().strip() or None
        except OSError:
            return None

    @property
    def lock_path(self) -> Path:
        return self.run_dir / "runner.lock"

    @property
    def runner_pid_path(self) -> Path:
        """The pid of the detached runner the local engine's submit started (see engines/local)."""
        return self.run_dir / "runner.pid"

    @property
    def runner_log_path(self) -> Path:
        return self.run_dir / "runner.log"

    @property
    def logs_dir(self) -> Path:
        return self.run_dir / "logs"

    def stdout_path(self, node: str) -> Path:
        return self.logs_dir / f"{file_stem(node)}.out"

    def stderr_path(self, node: str) -> Path:
        return self.logs_dir / f"{file_stem(node)}.err"

    def failure_log(self, node: str) -> Path | None:
        """The log to point at when the node failed: its stderr, else its stdout, whichever holds anything."""
        for path in (self.stderr_path(node), self.stdout_path(node)):
            try:
                if path.stat().st_size > 0:
                    return path
            except OSError:
                pass
        return None

    @property
    def cache_dir(self) -> Path:
        return self.runs_dir.parent / "cache"

    @classmethod
    def from_run_dir(cls, run_dir: Path) -> RunLayout:
        run_dir = Path(run_dir).absolute()
        return cls(run_dir.parent, run_dir.name)

    def exists(self) -> bool:
        try:
            return self.plan_path.is_file()
        except PermissionError:
            raise UnreadableRunError(self.run_dir) from None

    def create(self, plan: Plan, engine: str = "local") -> None:
        """Make the run directory, record the engine making it, write plan.json and note the run in the user's
        index of runs (run/index.py); the run id must be new. The engine marks it `latest` once it really
        starts it: a submission that fails or a dry run never is."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        if not self.engine_path.exists():  # recorded once: a continued run keeps its engine
            write_atomic(self.engine_path, (engine + "\n").encode())
        write_atomic(self.plan_path, plan.to_json().encode())
        self.record_pipeline(plan)
        self.journal_path.touch()
        note_run(self.run_dir, plan.pipeline)

    def record_pipeline(self, plan: Plan) -> None:
        """Remember the content of the pipeline file a plain run (not a search trial) was planned from."""
        source = pipeline_path(plan)
        if source is not None and all(node.trial is None for node in plan.nodes.values()):
            write_atomic(self.pipeline_hash_path, (file_hash(source) + "\n").encode())

    def mark_latest(self) -> None:
        """Make this run `latest`, unless it is a search's trial (the search owns those, not the user) or a
        dry run."""
        if _never_latest(self.run_dir):
            return
        write_atomic(self.runs_dir / LATEST_FILE, (self.run_id + "\n").encode())

    def mark_dry_run(self) -> None:
        """Mark the run as compiled only to be looked at, before anything else of it is written: killed at any
        point after, it is never `latest` (the engine removes the mark when it really submits the run)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / DRY_RUN_FILE).touch()

    def load_plan(self) -> Plan:
        try:
            from dagflow.plan import Plan

            return Plan.from_json(self.plan_path.read_text())
        except FileNotFoundError:
            raise RunNotFoundError(f"no run {self.run_id!r} under {self.runs_dir}") from None
        except (ValueError, KeyError, TypeError) as error:
            raise RunNotFoundError(f"{self.plan_path} is not a readable plan: {error}") from None


def pipeline_path(plan: Plan) -> Path | None:
    """The pipeline file a plan was expanded from, if it is a YAML file that still exists."""
    source = Path(plan.source)
    if not source.is_absolute():  # relative to where `dagflow run` ran; the workdir is its directory
        source = Path(plan.workdir) / source.name
    if source.suffix not in (".yaml", ".yml") or not source.is_file():
        return None
    return source


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def find_run(runs_dir: Path, run_id: str | None) -> RunLayout:
    """The run named run_id (or "latest", or None for the latest) under runs_dir."""
    runs_dir = Path(runs_dir).absolute()
    if run_id is None or run_id == "latest":
        return latest_run(runs_dir)
    validate_run_id(run_id)
    layout = RunLayout(runs_dir, run_id)
    if not layout.exists():
        known = list_runs(runs_dir)
        hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
        raise RunNotFoundError(f"no run {run_id!r} under {runs_dir}{hint}")
    return layout


def pipeline_runs_dir(pipeline: Path) -> Path:
    """Where runs of a pipeline file go by default: .dagflow/runs beside it (relative when the file's path is:
    `pipeline.yaml` gives `.dagflow/runs`)."""
    return Path(pipeline).parent / DEFAULT_RUNS_DIR


def unique_dirs(paths: Iterable[Path]) -> list[Path]:
    """paths without the ones naming a directory named before (symbolic links resolved), in order."""
    unique: dict[str, Path] = {}
    for path in paths:
        unique.setdefault(os.path.realpath(path), path)
    return list(unique.values())


def remember_runs_dir(runs_dir: Path, here: Path) -> None:
    """Note runs_dir in here's .dagflow/other-runs when it is not here's own runs dir, so that commands given
    no pipeline in here find its runs too."""
    runs_dir = Path(runs_dir).absolute()
    if len(unique_dirs([here / DEFAULT_RUNS_DIR, runs_dir])) == 1 or runs_dir in _other_runs_dirs(here):
        return
    record = here / OTHER_RUNS_FILE
    record.parent.mkdir(parents=True, exist_ok=True)
    with open(record, "a", encoding="utf-8") as handle:  # one short append: concurrent runs at worst repeat a line
        handle.write(f"{runs_dir}\n")


def _other_runs_dirs(here: Path) -> list[Path]:
    try:
        lines = (here / OTHER_RUNS_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [Path(line) for line in lines if line.startswith("/")]


def runs_dirs_seen_from(here: Path) -> list[Path]:
    """Where a command given no pipeline and no --runs-dir looks for runs, in order: here's .dagflow/runs, then
    the runs dirs of pipelines run from here (newest noted first)."""
    return unique_dirs([here / DEFAULT_RUNS_DIR, *reversed(_other_runs_dirs(here))])


def locate_run(runs_dirs: Sequence[Path], run_id: str | None) -> RunLayout:
    """The run named run_id in the first of runs_dirs that has it; for None or "latest", the newest of their
    latest runs. Not found: an error naming every directory looked in and how to point elsewhere."""
    dirs = [Path(runs_dir).absolute() for runs_dir in runs_dirs]
    looked = ", ".join(map(str, dirs))
    if run_id is not None and run_id != "latest":
        validate_run_id(run_id)
        for runs_dir in dirs:
            if RunLayout(runs_dir, run_id).exists():
                return RunLayout(runs_dir, run_id)
        known = [name for runs_dir in dirs for name in list_runs(runs_dir)]
        hint = f" (known runs: {', '.join(known[-5:])})" if known else ""
        raise RunNotFoundError(f"no run {run_id!r} under {looked}{hint}; {RUNS_DIR_HINT}")
    found = []
    for runs_dir in dirs:
        try:
            found.append(latest_run(runs_dir))
        except RunNotFoundError:
            continue
    if not found:
        raise RunNotFoundError(f"no runs under {looked}; {RUNS_DIR_HINT}")
    return max(found, key=lambda layout: layout.plan_path.stat().st_mtime)


def list_runs(runs_dir: Path) -> list[str]:
    """The runs under runs_dir this user can read (unreadable_runs: the others)."""
    return [name for name, readable in _run_entries(runs_dir) if readable]


def unreadable_runs(runs_dir: Path) -> list[str]:
    """The runs under runs_dir in directories this user may not enter: to it they are not runs, but a check
    that looks at every run (is one live?) says it could not look at these."""
    return [name for name, readable in _run_entries(runs_dir) if not readable]


def _run_entries(runs_dir: Path) -> list[tuple[str, bool]]:
    """(name, readable) of each run directory (one holding plan.json) under runs_dir, sorted by name; a name
    starting with "." (no run id does: a run `runs gc` is removing) is none."""
    if not runs_dir.is_dir():
        return []
    entries = []
    for entry in os.scandir(runs_dir):
        if entry.name.startswith("."):
            continue
        try:
            if (Path(entry.path) / "plan.json").is_file():
                entries.append((entry.name, True))
        except PermissionError:
            entries.append((entry.name, False))
    return sorted(entries)


def _never_latest(run_dir: Path) -> bool:
    return (run_dir / SEARCH_TRIAL_FILE).exists() or (run_dir / DRY_RUN_FILE).exists()


def latest_run(runs_dir: Path) -> RunLayout:
    try:
        run_id = (runs_dir / LATEST_FILE).read_text().strip()
        if run_id and (runs_dir / run_id / "plan.json").is_file() and not _never_latest(runs_dir / run_id):
            return RunLayout(runs_dir, run_id)
    except OSError:
        pass
    runs = [name for name in list_runs(runs_dir) if not _never_latest(runs_dir / name)]
    if not runs:
        raise RunNotFoundError(f"no runs under {runs_dir}")
    newest = max(runs, key=lambda name: (runs_dir / name / "plan.json").stat().st_mtime)
    return RunLayout(runs_dir, newest)
