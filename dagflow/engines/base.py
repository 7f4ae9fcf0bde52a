"""The one contract every engine implements (local, condor, slurm, ...), and what an engine declares.

An engine turns a Plan into work somewhere: a backend of the run session (run/session.py), which makes the
run directory, asks the live-run rule and re-plans an edited run for every engine alike. An engine owns
nothing but what it writes into the run directory; status, resume and reports read that directory. Callers
(the CLI, the search scheduler, status) reach engines only through dagflow/engines/registry.py, never by
name.

An engine class declares:
  name      its registry name (`--engine NAME`)
  summary   one line for `--help`
  options   its own settings (EngineOption); the CLI turns each into a flag of the commands it names
  honours   the step fields it turns into placement (RESOURCE_FIELDS); `dagflow validate --engine`
            warns about the others
and is built as EngineClass(runs_dir, settings) with settings keyed by option name (defaults filled in).
Its package names it, its options, its capabilities and its spec check in an EngineDeclaration, found
through the `dagflow.engines` entry-point group (registry.py).

The spec check is how an engine checks the fields only it reads (its section: its own block and step fields)
once, when the pipeline is loaded, with the positions load_spec read, so each problem is
located at file:line:column and reported with the document's own:

    def check(spec: Spec, settings: Mapping[str, Any] | None) -> list[Diagnostic]

settings None: the pipeline is checked or run elsewhere: report what the document itself gets wrong in this
engine's fields (a malformed expression), which is wrong wherever it runs. settings (its options by name,
defaults filled in): the run is this engine's: also what this engine cannot run with those settings.
Every caller (validate, run, submit, compile, search run) gets the checks from registry.spec_checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from dagflow.plan import Plan
    from dagflow.run.layout import RunLayout
    from dagflow.run.live_runs import Live
    from dagflow.run.reports import Cancelled, Launched
    from dagflow.run.session import Work
    from dagflow.run.status import RunStatus

# Step fields that place a node (resources and the rest); each engine honours a subset.
RESOURCE_FIELDS = (
    "cpus", "memory", "memory_max", "disk", "gpus", "gpu_memory", "cuda_capability",
    "requirements", "classads", "priority", "timeout",
)  # fmt: skip

# Commands whose flags engine options can be: starting a run and continuing one.
ENGINE_COMMANDS = frozenset({"run", "submit", "resubmit"})


@dataclass(frozen=True, slots=True)
class EngineOption:
    """One setting an engine accepts; the CLI shows it as a flag on each command in `commands`."""

    name: str  # the settings key, a Python identifier
    flags: tuple[str, ...]  # e.g. ("--name", "--schedd"); the first is the canonical spelling
    help: str
    type: type = str  # str, int, float, bool (a switch) or list (repeatable, of str)
    default: Any = None
    commands: frozenset[str] = ENGINE_COMMANDS
    min: float | None = None
    metavar: str | None = None


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What callers may count on from an engine, beyond the contract."""

    streams_progress: bool  # metric lines a node writes can be read while it runs (early stopping)


@dataclass(frozen=True, slots=True)
class EngineDeclaration:
    """What an engine's `dagflow.engines` entry point names: enough to list it, build its flags and know its
    capabilities without importing the engine itself (its scheduler's client libraries may be missing).

    An installed package adds an engine with an entry point, exactly as the built-in ones are declared in
    dagflow's pyproject.toml:  [project.entry-points."dagflow.engines"]  NAME = "its_module:DECLARATION"
    (an entry point naming an Engine class instead is taken with that class's options and no capability)."""

    target: str  # "module:Class" of the class implementing Engine
    options: tuple[EngineOption, ...] = ()
    capabilities: Capabilities = Capabilities(streams_progress=False)
    legacy_marker: str | None = None  # a file marking a run it made before runs recorded their engine
    # "module:function" of its spec check (the module docstring); None: the engine has no fields of its own
    spec_check: str | None = None
    # "module:attribute" of its parts of the pipeline file (spec/sections.py EngineSection: its top-level block,
    # under its name, and its own step fields); None: it adds none
    section: str | None = None
    # What it offers callers beyond the contract, by name -> "module" or "module:attribute" (registry.py
    # engine_feature): condor's `compile` and `lint` (the commands), `cron` (schedule install --condor),
    # `progress_files` (where search early stopping reads a running trial's streamed metric lines:
    # (run_dir, plan, metrics files) -> the files to read, run/progress_stream.py StreamedFile for marked ones);
    # condor's `locate_runs` (a run id prefix -> the run directories the schedd knows: status/logs/cancel from
    # anywhere); local's `check_devices` (search run --gpus), `drop_cache_entries` (runs gc) and
    # `launch_here` ((engine, layout, work) -> a runner to run on a thread of the caller's: a search's trials)
    provides: tuple[tuple[str, str], ...] = ()


@runtime_checkable
class Engine(Protocol):
    """A backend the run session (run/session.py) drives: the session makes the run directory, asks the
    live-run rule, re-plans an edited run, marks `latest`, follows the run and says what happened; an engine
    writes its own files, starts the work, reads it and stops it, and returns data, never words to print.
    An engine whose nodes can run in this process adds `drive(layout, work, reporter) -> RunResult`
    (session.py Foreground): `dagflow run` runs them there, in the foreground."""

    name: ClassVar[str]
    summary: ClassVar[str]
    options: ClassVar[tuple[EngineOption, ...]]
    honours: ClassVar[frozenset[str]]
    system: str  # where its nodes run, as the live view and the reports name it ("HTCondor"); "": here
    runs_dir: Path  # as the user gave it (EngineClass(runs_dir, settings)): the hints printed name it so
    poll_s: float  # seconds between two looks at a run the session follows

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        """Check plan and write the files the engine generates for it into run_dir (compiled ones); start
        nothing. Called before plan.json marks a new run made, and again when an edit re-planned a run."""

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None:
        """Refuse continuing the run with these settings where the engine cannot; the settings its edited
        pipeline file is checked with (registry.spec_checks)."""

    def launch(self, layout: RunLayout, work: Work) -> Launched:
        """Start work (a new run's nodes, or what a continued run has left) and return without waiting: what
        it started, as data (run/reports.py Launched). A continued run with nothing left to start may raise
        run/session.py NothingToLaunchError."""

    def wait(self, run_dir: Path) -> None:
        """Block until the run's work has ended (succeeded, failed or stopped)."""

    def ingest(self, run_dir: Path) -> bool:
        """Fold what the engine's scheduler observed since the last ingest (its files, its accounting) into
        the run directory: the journal (run/journal.py) and usage records. Repeatable and idempotent: with
        nothing new it writes nothing. Whether anything was new. Called by whoever waits on the run, and by
        `dagflow status` before it reads where it may write."""

    def read_status(self, layout: RunLayout) -> RunStatus:
        """The run's whole status view (`dagflow status`), read from the run directory without writing it
        (a live run's facts may still be asked of the scheduler)."""

    def cancel(self, run_dir: Path) -> Cancelled | None:
        """Stop the work started by launch: what it stopped itself, or None where what drives the run stops
        its nodes (the session waits for that)."""

    def live(self, layout: RunLayout) -> Live | None:
        """What of the run is still live (its nodes that run or may still start, what drives it), read from the
        engine's own records without changing anything; None: nothing. The one rule over it: run/live_runs.py."""


class EngineBase:
    """Defaults for the parts of the contract most engines share; subclasses set the class attributes."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    options: ClassVar[tuple[EngineOption, ...]] = ()
    honours: ClassVar[frozenset[str]] = frozenset()
    system: ClassVar[str] = ""
    poll_s: ClassVar[float] = 1.0

    def __init__(self, runs_dir: Path | None = None, settings: Mapping[str, Any] | None = None) -> None:
        from dagflow.run.layout import DEFAULT_RUNS_DIR

        self.runs_dir = Path(runs_dir) if runs_dir is not None else DEFAULT_RUNS_DIR  # as given: hints show it
        self.settings = {option.name: option.default for option in type(self).options}
        self.settings.update(settings or {})

    def ingest(self, run_dir: Path) -> bool:
        """Nothing to fold in: the engine's nodes journal themselves."""
        return False

    def prepare(self, plan: Plan, run_dir: Path) -> None:
        from dagflow.plan.graph import check_plan

        check_plan(plan)

    def continuing(self, layout: RunLayout) -> Mapping[str, Any] | None:
        return self.settings

    def live(self, layout: RunLayout) -> Live | None:
        """Live while its status says something drives it (runner_alive): every node not finished yet."""
        from dagflow.run.journal import DONE_STATES
        from dagflow.run.live_runs import Live

        status = self.read_status(layout)  # type: ignore[attr-defined]
        if not status.runner_alive:
            return None
        states = status.node_states()
        return Live(frozenset(name for name, state in states.items() if state not in DONE_STATES), driver=self.driver)

    @property
    def driver(self) -> str:
        """What drives a live run of this engine, as a refusal names it."""
        return f"its {self.name} jobs"
