"""A node runs in at most one live run at a time, on every engine: the one check every `dagflow run`,
`submit`, `resubmit`, `run --resume`, schedule firing and search trial makes before it starts or continues a
run.

Each engine says, for one of its runs, whether anything of it is still live (Engine.live: a narrow, read-only
fact from its own records: the local runner's lock and its keeper's processes, the DAGMan job, the queued
Slurm or Grid Engine jobs). The rule itself lives here, once:

- a run being continued (`--resume`, `resubmit`) that something still drives (a live runner, a DAGMan job,
  queued jobs) is refused: following or stopping it is the way, not a second driver;
- a run that shares a node with an earlier live run of the same pipeline (same workdir and pipeline file) is
  refused, naming that run, the shared nodes and the command that follows or stops it. Shared means the same
  node name for a node that runs now or may still be started (both would write its files), and also the
  same fingerprint (command, environment, params, paths) for one that ended with a result nothing recorded
  yet (the new run would do that work again);
- a plain re-run that is exactly an earlier run cut short (its runner died, nothing drives it, its keeper
  may still run nodes: the same engine, nodes and `--only`/`--set`) continues that run instead of starting
  a new one, which adopts its live nodes and takes its recorded results.

Runs of disjoint node sets never block each other, and a crashed run whose nodes have all ended and been
recorded blocks nobody. A search trial is checked as it starts, as any new run (it never takes another run
over); trials and dry runs are runs of their own and block no later run. The rule is asked by the run session
(session.py) only, so every caller that starts or continues a run goes through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from dagflow.errors import DagflowError
from dagflow.plan import Plan
from dagflow.run.layout import (
    DRY_RUN_FILE,
    SEARCH_TRIAL_FILE,
    RunLayout,
    RunNotFoundError,
    list_runs,
    unreadable_runs,
)

_SHOWN = 5  # node names a refusal lists


class LiveRunError(DagflowError):
    """Refused: the run would run a node that a live run runs (exit code 2)."""


@dataclass(frozen=True, slots=True)
class Live:
    """What an engine says of one of its runs that has not settled."""

    running: frozenset[str]  # nodes that run now, or that it may still start
    unrecorded: frozenset[str] = frozenset()  # nodes that ended with a result no runner has recorded yet
    driver: str | None = None  # what still drives it ("runner pid 12", "DAGMan job 7.0"); None: nothing


LiveOf = Callable[[RunLayout], "Live | None"]


def driven(layout: RunLayout, driver: str) -> Live | None:
    """A run whose driver (its runner, a job executor's driver) holds the run's lock: every node it has not
    finished may still start, and the driver is named as `driver pid N`. None: no driver holds it."""
    from dagflow.run.journal import read_journal
    from dagflow.run.lock import CANCEL, holder, is_locked

    if not is_locked(layout.lock_path):
        return None
    done = read_journal(layout.journal_path).done()
    found = holder(layout.lock_path)
    if found is not None and found[1] == CANCEL:
        driver = "`dagflow cancel`"
    running = frozenset(name for name in layout.load_plan().nodes if name not in done)
    return Live(running, driver=f"{driver} pid {found[0]}" if found else f"a live {driver}")


@dataclass(frozen=True, slots=True)
class Admission:
    """What the check decided for a new run: start it (continue None), or continue that cut-short run."""

    continue_run: RunLayout | None = None
    note: str = ""


def pipeline_identity(plan: Plan) -> tuple[str, str]:
    """(workdir, pipeline file) of a plan, both resolved: what makes two runs runs of one pipeline."""
    workdir = os.path.realpath(plan.workdir)
    source = Path(plan.source)
    if not source.is_absolute():  # relative to where `dagflow run` ran; the workdir is its directory
        source = Path(workdir) / source.name
    return workdir, os.path.realpath(source)


def admit_new(plan: Plan, runs_dir: Path, engine: str, live_of: LiveOf, adopt: bool = True) -> Admission:
    """Check a new run of plan (on engine, under runs_dir) against every earlier live run; raises
    LiveRunError, or says which cut-short run to continue instead (adopt False: a search trial, whose run is
    its own, is refused beside such a run as beside any other)."""
    identity = pipeline_identity(plan)
    adoptable: list[tuple[RunLayout, Plan, Live]] = []
    blockers: list[str] = []
    for layout, earlier, live in _live_runs(Path(runs_dir).absolute(), {plan.run_id}, identity, live_of):
        if adopt and live.driver is None and layout.recorded_engine() == engine and _same_run(plan, earlier):
            adoptable.append((layout, earlier, live))
            continue
        shared = _shared(plan, earlier, live)
        if shared:
            blockers.append(_blocker(layout, earlier, live, shared))
    if len(adoptable) > 1:
        for layout, earlier, live in adoptable:
            blockers.append(_blocker(layout, earlier, live, sorted(live.running | live.unrecorded)))
    if blockers:
        raise LiveRunError(_refusal(plan, blockers))
    unchecked = _unchecked(Path(runs_dir).absolute())
    if not adoptable:
        return Admission(note=unchecked)
    ((layout, _, live),) = adoptable
    pending = len(live.running | live.unrecorded)
    continuing = (
        f"dagflow: run {layout.run_id} of {plan.source} was cut short (its runner died) and {pending} of its "
        "node(s) still run or finished unrecorded: continuing that run instead of starting a new one"
    )
    return Admission(layout, "\n".join(filter(None, (unchecked, continuing))))


def _unchecked(runs_dir: Path) -> str:
    """A line naming the runs this user may not read, so could not check for live nodes; "" when none."""
    names = unreadable_runs(runs_dir)
    if not names:
        return ""
    return (
        f"dagflow: warning: not checked for nodes they may still run, as this user may not read them: "
        f"run(s) {_listed(names)} under {runs_dir} (another user's: make them readable with `chmod -R a+rX`)"
    )


def admit_continued(layout: RunLayout, live_of: LiveOf) -> None:
    """Check continuing the run in layout (`--resume`, `resubmit`): nothing may drive it now, and no other
    live run may share its nodes; raises LiveRunError."""
    itself = live_of(layout)
    if itself is not None and itself.driver is not None:
        raise LiveRunError(
            f"run {layout.run_id} is running now ({itself.driver}): follow it with `dagflow status "
            f"{layout.run_id}`, or stop it with `dagflow cancel {layout.run_id}` before continuing it"
        )
    if (layout.run_dir / SEARCH_TRIAL_FILE).exists():  # a search's trial: checked against others when it started
        return
    plans: list[Plan] = []  # its own plan, read only once another run is found live: a big plan takes time

    def own() -> Plan:
        if not plans:
            plans.append(layout.load_plan())
        return plans[0]

    blockers: list[str] = []
    for other in list_runs(layout.runs_dir):
        earlier_layout = RunLayout(layout.runs_dir, other)
        if other == layout.run_id or not _may_be_live(earlier_layout):
            continue
        found = _live_run(earlier_layout, lambda: pipeline_identity(own()), live_of)
        if found is not None and (shared := _shared(own(), *found)):
            blockers.append(_blocker(earlier_layout, *found, shared))
    if blockers:
        raise LiveRunError(_refusal(own(), blockers))


def _live_runs(
    runs_dir: Path, skip: set[str], identity: tuple[str, str], live_of: LiveOf
) -> Iterable[tuple[RunLayout, Plan, Live]]:
    """Earlier runs of the pipeline with that identity that are live, newest first."""
    for run_id in reversed(list_runs(runs_dir)):
        if run_id in skip:
            continue
        layout = RunLayout(runs_dir, run_id)
        if not _may_be_live(layout):
            continue
        found = _live_run(layout, lambda: identity, live_of)
        if found is not None:
            yield layout, *found


def is_live(live: Live | None) -> bool:
    """Whether what an engine says of a run (Engine.live) makes it live: something of it runs, may still
    start, ended unrecorded, or drives it."""
    return live is not None and bool(live.running or live.unrecorded or live.driver)


def _may_be_live(layout: RunLayout) -> bool:
    return not ((layout.run_dir / SEARCH_TRIAL_FILE).exists() or (layout.run_dir / DRY_RUN_FILE).exists())


def _live_run(
    layout: RunLayout, identity: Callable[[], tuple[str, str]], live_of: LiveOf
) -> tuple[Plan, Live] | None:
    live = live_of(layout)  # its engine's look first: most runs have settled, and their plans stay unread
    if not is_live(live):
        return None
    try:
        earlier = layout.load_plan()
    except RunNotFoundError:  # unreadable: not a run this one can collide with
        return None
    return (earlier, live) if pipeline_identity(earlier) == identity() else None


def _same_run(plan: Plan, earlier: Plan) -> bool:
    """Whether plan is a plain re-run of earlier: the same nodes with the same --only and --set."""
    return plan.overrides == earlier.overrides and plan.nodes.keys() == earlier.nodes.keys()


def _shared(plan: Plan, earlier: Plan, live: Live) -> list[str]:
    """plan's nodes that the live earlier run runs (by name), or has an unrecorded result of (the same node)."""
    shared = {name for name in live.running if name in plan.nodes}
    for name in live.unrecorded:
        mine, theirs = plan.nodes.get(name), earlier.nodes.get(name)
        if mine is not None and theirs is not None and plan.node_fingerprint(mine) == earlier.node_fingerprint(theirs):
            shared.add(name)
    return sorted(shared)


def _blocker(layout: RunLayout, earlier: Plan, live: Live, shared: list[str]) -> str:
    shown = _listed(shared)
    run_id = layout.run_id
    if live.driver is not None:
        return (
            f"run {run_id} of {earlier.source} is running now ({live.driver}) and runs or will run {shown}: "
            f"follow it with "
            f"`dagflow status {run_id}`, or stop it with `dagflow cancel {run_id}`"
        )
    return (
        f"run {run_id} of {earlier.source} was cut short (its runner died) and still runs, or has unrecorded "
        f"results of, {shown}: "
        f"continue it with `dagflow run --resume {run_id}`, or stop its nodes with `dagflow cancel {run_id}`"
    )


def _listed(names: list[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _refusal(plan: Plan, blockers: list[str]) -> str:
    return f"not starting {plan.source}, whose nodes would run twice at once: " + "; ".join(blockers)
