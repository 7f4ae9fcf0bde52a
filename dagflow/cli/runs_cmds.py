"""`dagflow runs` and `dagflow runs gc`: list every run dagflow knows of, wherever its pipeline lives, and
remove old ones (dagflow/run/known.py, dagflow/run/gc.py)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dagflow.cli.common import JsonOption, fail
from dagflow.cli.root import app
from dagflow.errors import DagflowError

if TYPE_CHECKING:
    from dagflow.run.known import KnownRun

runs_app = typer.Typer(
    help="List the runs dagflow knows of (every pipeline directory used), or remove old ones with `runs gc`.",
    no_args_is_help=False,
)
app.add_typer(runs_app, name="runs")

RunsDirsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--runs-dir", metavar="DIR", file_okay=False, show_default=False,
        help="Only the runs under this runs dir (repeatable) [default: every runs dir dagflow has used].",
    ),
]
PipelineOption = Annotated[
    str | None, typer.Option("--pipeline", metavar="NAME", help="Only the runs of the pipeline of this name.")
]


class RunsUsageError(DagflowError):
    pass


@runs_app.callback(invoke_without_command=True)
def runs_command(
    ctx: typer.Context,
    runs_dirs: RunsDirsOption = None,
    pipeline: PipelineOption = None,
    json_output: JsonOption = False,
) -> None:
    """List runs, oldest first: id, pipeline, engine, state, when it started, and where its directory is.

    Runs are found through the index of run directories in $XDG_STATE_HOME/dagflow (~/.local/state/dagflow),
    which every new run joins, and in the runs dirs those live in; `dagflow status RUN_ID`, `logs` and
    `cancel` find them by id (or a unique start of one) from any directory.
    """
    if ctx.invoked_subcommand is not None:
        return
    from dagflow.engines.registry import read_run_status

    rows = []
    for run in _runs(runs_dirs, pipeline):
        try:
            status = read_run_status(run.layout)
            engine, state = status.engine, status.state
        except DagflowError:
            engine, state = run.layout.recorded_engine() or "?", "unreadable"
        rows.append({
            "run_id": run.run_id, "pipeline": run.pipeline, "engine": engine, "state": state,
            "started": _when(run.started), "run_dir": str(run.layout.run_dir),
        })
    if json_output:
        print(json.dumps(rows, separators=(",", ":")))
        return
    if not rows:
        print("no runs known yet (a run joins the list when `dagflow run` or `submit` makes it)", file=sys.stderr)
        return
    _print_table(rows)


@runs_app.command("gc")
def gc_command(
    keep: Annotated[int | None, typer.Option("--keep", min=0, metavar="N", help="Keep the newest N runs of each "
                                             "pipeline.")] = None,
    older_than: Annotated[str | None, typer.Option("--older-than", metavar="DURATION", help="Remove only runs "
                                                   "nothing was written to for this long: 7d, 12h, 30m.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    runs_dirs: RunsDirsOption = None,
    pipeline: PipelineOption = None,
    json_output: JsonOption = False,
) -> None:
    """Remove old run directories and the cache entries only they account for, per pipeline.

    Never removed: a live run (running, queued, or with nodes a dead runner left running), the run behind a
    model a promotion pointer names now, a search's trial. With both --keep and --older-than, a run goes
    when it is past the newest N and old. A gc killed midway is finished by the next one.
    Exit status: 0 done, 2 bad arguments.
    """
    from dagflow.engines.registry import engine_feature, live_run
    from dagflow.promote.protected import promoted_runs
    from dagflow.run import gc
    from dagflow.spec.units import DURATION_HELP, parse_duration_s

    try:
        if keep is None and older_than is None:
            raise RunsUsageError("say which runs are old: --keep N (the newest N per pipeline stay), "
                                 "--older-than DURATION (e.g. 7d), or both")
        try:
            seconds = None if older_than is None else float(parse_duration_s(older_than))
        except ValueError as error:
            raise RunsUsageError(f"--older-than: {error} ({DURATION_HELP})") from None
        runs = _runs(runs_dirs, pipeline)
        behind = promoted_runs(run.layout.run_dir for run in runs)
        verdicts = gc.judge(runs, gc.Policy(keep, seconds), live_run, behind.get, time.time())
        doomed = [verdict for verdict in verdicts if verdict.remove]
        if dry_run:
            _print_dry_run(verdicts, json_output)
            return
        say = (lambda line: None) if json_output else (lambda line: print(line, file=sys.stderr, flush=True))
        summary = gc.collect(verdicts, live_run, engine_feature("local", "drop_cache_entries"), say)
    except DagflowError as error:
        fail(error)
    if json_output:
        print(json.dumps({"removed": summary.removed, "bytes": summary.bytes, "cache_entries": summary.cache_entries,
                          "kept": summary.kept, "protected": summary.protected}, separators=(",", ":")))
        return
    protected = f" ({len(summary.protected)} protected: {', '.join(summary.protected)})" if summary.protected else ""
    print(f"gc: removed {summary.removed} of {len(doomed)} old run(s), {summary.bytes / 1e6:.1f} MB, and "
          f"{summary.cache_entries} cache entr{'y' if summary.cache_entries == 1 else 'ies'}; kept {summary.kept}"
          f"{protected}")


def _runs(runs_dirs: list[Path] | None, pipeline: str | None) -> list[KnownRun]:
    from dagflow.run.known import known_runs
    from dagflow.run.layout import unique_dirs

    if runs_dirs:
        wanted = {str(path) for path in map(lambda d: Path(d).resolve(), runs_dirs)}
        runs = [run for run in known_runs(unique_dirs(runs_dirs)) if str(run.layout.runs_dir.resolve()) in wanted]
    else:
        runs = known_runs()
    return [run for run in runs if pipeline is None or run.pipeline == pipeline]


def _print_dry_run(verdicts: list[Any], json_output: bool) -> None:
    if json_output:
        print(json.dumps([{"run_id": v.run.run_id, "run_dir": str(v.run.layout.run_dir), "remove": v.remove,
                           "why": v.why} for v in verdicts], separators=(",", ":")))
        return
    doomed = [verdict for verdict in verdicts if verdict.remove]
    for verdict in doomed:
        print(f"would remove {verdict.run.run_id} ({verdict.why}): {verdict.run.layout.run_dir}")
    print(f"gc --dry-run: would remove {len(doomed)} run(s); keep {len(verdicts) - len(doomed)}")


def _when(started: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if started else "?"


def _print_table(rows: list[dict[str, str]]) -> None:
    columns = {"RUN": "run_id", "PIPELINE": "pipeline", "ENGINE": "engine", "STATE": "state", "STARTED": "started"}
    widths = {key: max(len(title), *(len(row[key]) for row in rows)) for title, key in columns.items()}
    print("  ".join(title.ljust(widths[key]) for title, key in columns.items()) + "  WHERE")
    for row in rows:
        print("  ".join(row[key].ljust(widths[key]) for key in columns.values()) + "  " + row["run_dir"])
