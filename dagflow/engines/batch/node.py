"""The node wrapper of the batch engines: runs one node inside its batch job, as the local runner would.

    python -m dagflow.engines.batch.node --journal RUN/journal.jsonl --logs RUN/logs --node NAME \
        --workdir DIR [--retries N] [--unless-exit 2,3] [--timeout S] [--grace S] [--job REF] \
        [--checkpoint-exit CODE --max-restarts N] [--env KEY=VALUE ...] [--parent NODE ...] \
        [--cancel-marker FILE --submission N] -- ARGV...

It journals every attempt's `start` and `end` (run/journal.py's append_events, so status reads one journal
whichever engine ran the plan), sends the node's output to `<logs>/<node>.out` and `.err`, and retries: a
failed attempt is retried unless its exit code is one of `--unless-exit` (a timed-out or killed attempt is
always retried), up to `--retries` times, as the local engine decides.
Each attempt gets `--timeout` seconds, then SIGTERM to its process tree and, after `--grace`, SIGKILL.
An exit with `--checkpoint-exit` (the step's `checkpoint:`) is journaled `checkpointed` and the node runs
again at once, its checkpoint files left in place: no failed attempt, up to `--max-restarts` times.

With `--parent`, the node first checks its parents' journal records and runs only if every one succeeded:
Grid Engine's `-hold_jid` waits for a job to end, not to succeed, so this is where a failure stops the
nodes below it. Below a failed node it journals itself `upstream_failed`; below a parent whose job ended
without an `end` event (deleted, killed) it journals nothing and leaves the node to the status reader.

The exit status is the node's (0, its exit code, 128+signal, 127 when it cannot start), except that 99
and 100 become 1: Grid Engine requeues a job that exits 99 and puts one that exits 100 in its error state.
A wrapper stopped by a signal (a cancelled job) stops the node and exits without an `end` event; the
engine's status reader journals what became of it. So does one whose node a stop signal ended (killed, or a
shell exiting 128+signal) while `--cancel-marker` names this `--submission` or a later one: `dagflow cancel`
writes it before signalling the jobs, which decides the race between the node's signal and the wrapper's.

Each attempt that started is measured (wait4's rusage) and appended to the run's usage.jsonl, with the
node's `--step` and `--request`s and what the scheduler allocated (batch/usage.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType

from dagflow.engines.batch.gpu_memory import GpuMemoryUnknownError, fill_batch_gpu_memory
from dagflow.engines.batch.usage import Stopwatch, oom_kills, reason_of, record_attempt, wait_measured
from dagflow.files import file_stem
from dagflow.run.exits import describe_exit
from dagflow.run.journal import (
    CHECKPOINTED,
    DONE_STATES,
    FAILED,
    RETRY,
    SUCCEEDED,
    UPSTREAM_FAILED,
    append_events,
    end_event,
    read_journal,
    start_event,
    upstream_failed_event,
)

RESERVED_EXITS = frozenset({99, 100})  # Grid Engine: 99 requeues the job, 100 puts it in error state
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
OWN_STOP_WAIT_S = 2.0  # how long a node killed by a stop signal waits for the wrapper's own (see run_attempt)


@dataclass(frozen=True, slots=True)
class NodeJob:
    node: str
    argv: list[str]
    journal: Path
    logs: Path
    workdir: Path
    retries: int = 0
    unless_exit: frozenset[int] = frozenset()
    timeout_s: float = 0.0
    grace_s: float = 10.0
    job: str = ""
    env: dict[str, str] = field(default_factory=dict)
    parents: tuple[str, ...] = ()
    checkpoint_exit: int | None = None
    max_restarts: int = 0
    step: str = ""  # for the usage record
    requested: dict[str, float] = field(default_factory=dict)  # the plan's request, for the usage record
    cancel_marker: Path | None = None  # the file `dagflow cancel` writes its submission number to ...
    submission: int = 0  # ... before it signals the jobs of this one

    def cancelled(self) -> bool:
        """Whether `dagflow cancel` stopped this job's submission (it writes the marker first)."""
        if self.cancel_marker is None:
            return False
        try:
            return int(self.cancel_marker.read_text()) >= self.submission
        except (OSError, ValueError):
            return False

    @property
    def stdout(self) -> Path:
        return self.logs / f"{file_stem(self.node)}.out"

    @property
    def stderr(self) -> Path:
        return self.logs / f"{file_stem(self.node)}.err"


class Stopped(Exception):
    """The wrapper itself got a stop signal (its job was cancelled)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def exit_status(rc: int) -> int:
    if rc < 0:
        return 128 - rc
    if rc in RESERVED_EXITS or rc > 255:
        return 1
    return rc


def upstream_failure(job: NodeJob) -> tuple[str, str] | None:
    """None when every parent succeeded (or was cached); else ("failed", the failed node above this one)
    or ("unfinished", a parent with no end): its job was deleted (a cancel) or killed by the batch system
    before the wrapper could journal it, and the engine's status reader journals what became of it."""
    records = read_journal(job.journal).nodes
    for parent in job.parents:
        record = records.get(parent)
        if record is not None and record.state in DONE_STATES:
            continue
        if record is not None and record.state == FAILED:
            return "failed", parent
        why = record.why if record is not None else None
        if record is not None and record.state == UPSTREAM_FAILED and why and why.startswith("upstream "):
            return "failed", why.removeprefix("upstream ").removesuffix(" failed")
        return "unfinished", parent
    return None


def _descendants(pid: int) -> list[int]:
    """pid and every process below it, parents first (from /proc; a batch node is Linux)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def stop_tree(proc: subprocess.Popen[bytes], grace_s: float) -> resource.struct_rusage | None:
    """SIGTERM the node's processes, SIGKILL what is left after grace_s. The node shares the wrapper's
    process group (Grid Engine's qdel kills the job's group, so a node in a group of its own would
    outlive its cancelled job), hence the walk over /proc instead of killpg. Returns the node process's
    rusage once reaped."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        for pid in _descendants(proc.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        usage = wait_measured(proc, wait_s)
        if usage is not None:
            return usage
    return None


def stop_signal_of(rc: int | None) -> int:
    """The signal that ended a node: killed by it (rc -N), or a shell whose command it killed exiting
    128+N, as sh does (`sh -c "sleep 60; exit $?"` exits 143 on SIGTERM); 0 for an ordinary exit."""
    if rc is None:
        return 0
    return -rc if rc < 0 else rc - 128 if 128 < rc < 160 else 0


def run_attempt(job: NodeJob, env: dict[str, str], attempt: int = 1) -> tuple[int, str | None]:
    """(exit code, why it failed or None) of one attempt; what it used goes to usage.jsonl."""
    oom_before = oom_kills()
    with open(job.stdout, "ab") as out, open(job.stderr, "ab") as err:
        watch = Stopwatch()
        try:
            proc = subprocess.Popen(
                job.argv, cwd=job.workdir, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
        except OSError as error:
            why = f"cannot start {job.argv[0]!r}: {error.strerror or error}"
            err.write(f"dagflow: {why}\n".encode())
            return 127, why

    def measured(usage: resource.struct_rusage | None, timed_out: bool = False, stopped: bool = False) -> int:
        rc = proc.returncode if proc.returncode is not None else -signal.SIGKILL
        reason = reason_of(rc, timed_out, stopped, oom_before)
        taken = None if usage is None else watch.reaped(usage)
        record_attempt(job.journal.parent, job.node, job.step, attempt, job.requested, taken, rc, reason, job.job)
        return rc

    usage = None
    try:
        usage = wait_measured(proc, job.timeout_s or None)
        if usage is None:
            rc = measured(stop_tree(proc, job.grace_s), timed_out=True)
            return rc, f"timed out after {job.timeout_s:g}s"
        stop = stop_signal_of(proc.returncode)
        if stop in STOP_SIGNALS:
            # Killed by a stop signal the wrapper did not send: a cancelled job (scancel signals every process
            # of the job, the node's often first). If `dagflow cancel` did it, its marker says so already;
            # otherwise give the wrapper's own signal time to arrive, so the node ends cancelled, not failed.
            if job.cancelled():
                raise Stopped(stop)
            time.sleep(OWN_STOP_WAIT_S)
    except Stopped:
        measured(stop_tree(proc, job.grace_s) if proc.returncode is None else usage, stopped=True)
        raise
    rc = measured(usage)
    return rc, None if rc == 0 else describe_exit(rc)


def run_node(job: NodeJob) -> int:
    """Run the node to its end; the wrapper's exit status."""
    if job.parents:
        upstream = upstream_failure(job)
        if upstream is not None:
            kind, parent = upstream
            if kind == "failed":
                append_events(job.journal, [upstream_failed_event([job.node], parent)])
            else:
                print(f"dagflow: {job.node} not run: its parent {parent} ended without a result", file=sys.stderr)
            return 1
    env = {**os.environ, **job.env, "DAGFLOW_NODE": job.node}
    job.stdout.write_bytes(b"")
    job.stderr.write_bytes(b"")
    try:  # {gpu.memory_mb}: the memory of the GPUs this job got (gpu_memory.py)
        job = replace(job, argv=fill_batch_gpu_memory(job.argv, env))
    except GpuMemoryUnknownError as error:
        job.stderr.write_bytes(f"dagflow: {error}\n".encode())
        append_events(job.journal, [end_event(job.node, FAILED, attempt=1, rc=1, why=str(error))])
        return 1
    attempt = failed = restarts = 0
    state = ""
    while True:
        attempt += 1
        if attempt > 1:
            banner = f"restart {restarts} from its checkpoint" if state == CHECKPOINTED else f"attempt {attempt}"
            with open(job.stderr, "ab") as err:
                err.write(f"\n=== dagflow: {banner} ===\n".encode())
        append_events(job.journal, [start_event(job.node, attempt, job=job.job)], durable=False)
        rc, why = run_attempt(job, env, attempt)
        timed_out = why is not None and why.startswith("timed out")
        if why is None:
            state = SUCCEEDED
        elif not timed_out and rc == job.checkpoint_exit and restarts < job.max_restarts:
            state = CHECKPOINTED
            restarts += 1
            why = f"checkpointed (exit code {rc}): restart {restarts} of {job.max_restarts}"
        elif failed < job.retries and not (not timed_out and rc >= 0 and rc in job.unless_exit):
            state = RETRY
            failed += 1
        else:
            state = FAILED
        event = end_event(job.node, state, attempt=attempt, rc=rc, why=why)
        append_events(job.journal, [event], durable=state not in (RETRY, CHECKPOINTED))
        if state == SUCCEEDED:
            return 0
        if state == FAILED:
            return exit_status(rc)


def _on_stop(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signum)


def parse_args(argv: Sequence[str]) -> NodeJob:
    parser = argparse.ArgumentParser(prog="python -m dagflow.engines.batch.node", description=__doc__.split("\n")[0])
    parser.add_argument("--journal", type=Path, required=True)
    parser.add_argument("--logs", type=Path, required=True, help="directory of <node>.out and <node>.err")
    parser.add_argument("--node", required=True)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--retries", type=int, default=0)
    parser.add_argument("--unless-exit", default="", help="comma-separated exit codes not to retry")
    parser.add_argument("--timeout", type=float, default=0.0, help="seconds per attempt; 0: none")
    parser.add_argument("--grace", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    parser.add_argument("--job", default="", help="the batch job's id, journaled with each start")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--parent", action="append", default=[], help="run only if this node succeeded")
    parser.add_argument("--step", default="", help="the node's step (for its usage record)")
    parser.add_argument("--request", action="append", default=[], metavar="KEY=NUMBER", help="what the plan asks")
    parser.add_argument("--checkpoint-exit", type=int, default=None, help="the exit code that means: run me again")
    parser.add_argument("--max-restarts", type=int, default=0, help="checkpoint restarts allowed")
    parser.add_argument("--cancel-marker", type=Path, default=None, help="where `dagflow cancel` writes its submission")
    parser.add_argument("--submission", type=int, default=0, help="the submission this job belongs to")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not command:
        parser.error("no command to run after --")
    try:
        unless = frozenset(int(code) for code in args.unless_exit.split(",") if code)
    except ValueError:
        parser.error(f"--unless-exit {args.unless_exit!r} is not a list of exit codes")
    if any("=" not in item for item in args.env):
        parser.error("--env takes KEY=VALUE")
    try:
        requested = {key: float(value) for key, value in (item.split("=", 1) for item in args.request)}
    except ValueError:
        parser.error(f"--request takes KEY=NUMBER: {args.request}")
    return NodeJob(
        node=args.node,
        argv=command,
        journal=args.journal,
        logs=args.logs,
        workdir=args.workdir,
        retries=args.retries,
        unless_exit=unless,
        timeout_s=args.timeout,
        grace_s=args.grace,
        job=args.job,
        env=dict(item.split("=", 1) for item in args.env),
        parents=tuple(args.parent),
        step=args.step or args.node,
        requested=requested,
        checkpoint_exit=args.checkpoint_exit,
        max_restarts=args.max_restarts,
        cancel_marker=args.cancel_marker,
        submission=args.submission,
    )


def main(argv: Sequence[str] | None = None) -> int:
    job = parse_args(sys.argv[1:] if argv is None else argv)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop)
    try:
        return run_node(job)
    except Stopped as stopped:
        return 128 + stopped.signum


if __name__ == "__main__":
    raise SystemExit(main())
