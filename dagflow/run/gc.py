"""`dagflow runs gc`: remove old run directories and the cache entries only they account for.

Per pipeline (a runs dir and a pipeline name), runs are old past the newest `keep` and/or when nothing
was written to them for `older_than` seconds (both given: both must hold). Never removed: a live run (the
one live-run rule, run/live_runs.py is_live, asked again just before its removal), the run behind a
promoted model, a search's trial (the search owns it).

A removal survives kill -9 at any point: a run directory is first renamed to `.gc-<run-id>` beside it (one
rename: the run is gone or whole), then its cache entries are dropped (those whose keys its journal shows
and no remaining run's journal does), then the directory is deleted. A gc cut short leaves `.gc-*`
directories, which are no runs (run/layout.py list_runs), and the next gc finishes them first.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from dagflow.run.journal import read_journal
from dagflow.run.known import KnownRun
from dagflow.run.layout import SEARCH_TRIAL_FILE, RunLayout, list_runs
from dagflow.run.live_runs import LiveOf, is_live

TRASH_PREFIX = ".gc-"

DropCacheKeys = Callable[[Path, set[str]], int]  # (cache dir, keys) -> entries dropped


@dataclass(frozen=True, slots=True)
class Policy:
    keep: int | None = None  # the newest runs per pipeline kept
    older_than_s: float | None = None  # only runs nothing was written to for this long


@dataclass(frozen=True, slots=True)
class Verdict:
    run: KnownRun
    remove: bool
    why: str  # why it is kept, or why it goes


@dataclass(slots=True)
class Summary:
    removed: int = 0
    bytes: int = 0
    cache_entries: int = 0
    kept: int = 0
    protected: list[str] = field(default_factory=list)  # "RUN (why)" of the old runs kept


def judge(
    runs: Iterable[KnownRun], policy: Policy, live_of: LiveOf, promoted: Callable[[Path], str | None], now: float
) -> list[Verdict]:
    """What gc does with each run, grouped per pipeline, newest first."""
    groups: dict[tuple[str, str], list[KnownRun]] = {}
    for run in runs:
        groups.setdefault((os.path.realpath(run.layout.runs_dir), run.pipeline), []).append(run)
    verdicts = []
    for group in groups.values():
        group.sort(key=lambda run: (run.started, run.run_id), reverse=True)
        for rank, run in enumerate(group):
            verdicts.append(_judge_one(run, rank, policy, live_of, promoted, now))
    return verdicts


def _judge_one(
    run: KnownRun, rank: int, policy: Policy, live_of: LiveOf, promoted: Callable[[Path], str | None], now: float
) -> Verdict:
    if policy.keep is not None and rank < policy.keep:
        return Verdict(run, False, f"one of the newest {policy.keep}")
    idle = now - last_written(run.layout)
    if policy.older_than_s is not None and idle < policy.older_than_s:
        return Verdict(run, False, "newer than --older-than")
    if (run.layout.run_dir / SEARCH_TRIAL_FILE).exists():
        return Verdict(run, False, "a search's trial")
    pointer = promoted(run.layout.run_dir)
    if pointer is not None:
        return Verdict(run, False, f"behind the promoted model of {pointer}")
    if is_live(live_of(run.layout)):
        return Verdict(run, False, "live")
    return Verdict(run, True, f"idle {idle / 86400:.1f} days")


def last_written(layout: RunLayout) -> float:
    """The newest mtime of the run's journal and plan: when its run last did something."""
    times = []
    for path in (layout.journal_path, layout.plan_path):
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue
    return max(times, default=0.0)


def collect(
    verdicts: list[Verdict], live_of: LiveOf, drop_cache_keys: DropCacheKeys, say: Callable[[str], None]
) -> Summary:
    """Remove the runs the verdicts say, runs dir by runs dir, finishing any gc cut short there first."""
    summary = Summary(kept=sum(1 for verdict in verdicts if not verdict.remove))
    summary.protected = [f"{v.run.run_id} ({v.why})" for v in verdicts if not v.remove and _protective(v.why)]
    by_dir: dict[Path, list[RunLayout]] = {}
    for verdict in verdicts:
        by_dir.setdefault(verdict.run.layout.runs_dir, [])
        if verdict.remove:
            by_dir[verdict.run.layout.runs_dir].append(verdict.run.layout)
    for runs_dir, victims in by_dir.items():
        trash = _trash_in(runs_dir)  # left by a gc cut short
        for layout in victims:
            if is_live(live_of(layout)):  # it came alive since it was judged
                summary.kept += 1
                summary.protected.append(f"{layout.run_id} (live)")
                continue
            target = runs_dir / f"{TRASH_PREFIX}{layout.run_id}"
            try:
                os.rename(layout.run_dir, target)
            except OSError:  # another gc took it, or it went
                continue
            trash.append(target)
        if not trash:
            continue
        summary.cache_entries += drop_cache_keys(runs_dir.parent / "cache", _orphan_keys(runs_dir, trash))
        for path in trash:
            size = _size(path)
            shutil.rmtree(path, ignore_errors=True)
            summary.removed += 1
            summary.bytes += size
            say(f"removed {path.name[len(TRASH_PREFIX):]} ({_megabytes(size)}) from {runs_dir}")
    return summary


def _trash_in(runs_dir: Path) -> list[Path]:
    try:
        return sorted(entry for entry in runs_dir.iterdir() if entry.name.startswith(TRASH_PREFIX))
    except OSError:
        return []


def _orphan_keys(runs_dir: Path, trash: list[Path]) -> set[str]:
    """The cache keys the removed runs' journals show that no remaining run's journal does."""
    gone = _keys(trash)
    kept = _keys(runs_dir / run_id for run_id in list_runs(runs_dir))
    return gone - kept


def _keys(run_dirs: Iterable[Path]) -> set[str]:
    keys: set[str] = set()
    for run_dir in run_dirs:
        journal = read_journal(run_dir / "journal.jsonl")
        keys.update(record.key for record in journal.nodes.values() if record.key)
    return keys


def _protective(why: str) -> bool:
    return why in ("live", "a search's trial") or why.startswith("behind the promoted model")


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def _megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"

