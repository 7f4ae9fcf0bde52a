"""kill -9 stress of the live-run rule (#40): random kills of `dagflow run`, each followed by a plain, an `--only`
or a `--set` re-run, on the local engine or (--engine condor) the real HTCondor pool.

One command: `python benchmarks/kill_stress.py --kills 500 [--seed S] [--dir DIR]`. Each round starts one
of `dagflow run pipeline.yaml`, `... --only region=R` or `... --set alpha=A` and kills it with SIGKILL at a
random moment up to --max-delay s after its start, or after the next node event with --mid-node (unless it
ended first); the nodes its keeper runs live on,
as after a real crash. The next round's command either continues such a run, runs beside it (disjoint
nodes), or is refused (exit 2). At the end every run left cut short is resumed and each part of the plain
pipeline run once more to its end.

With --engine condor (the test pool of scripts/condor-pool.sh, which must be up; dagflow runs as its user, in
the shared data mode) a round is: start one of those commands, kill it at a random moment up to --max-delay
s, then at once the plain re-run a user would type. DAGMan outlives the kill, so that re-run is refused
(exit 2) while the DAG lives; admitted (the kill fell before the submission), it runs to its end. Before the
next round the test waits until no job of the work directory is in the queue. A finished node rerun is then
counted within a round (the killed run and its re-run): HTCondor has no cache, so the next round's command
runs every node of its own again, by design.

Each node takes an exclusive flock on lock.<node> for its whole life (the kernel drops it when the process
dies, SIGKILL included) and appends `start` and `end` lines (node, params, pid, run, time) to `events`.
A node is identified as the cache keys it: its name, its params and its parents in its run's plan (a gather
under `--only region=us` gathers one region: another node than the whole pipeline's). Checked:
- no node ran twice at once: a node that found its lock held wrote a `conflict` line;
- no finished node reran: no `start` of a node after an `end` of the same node;
- every command exited 0, 2 (refused) or was killed, and the closing runs succeeded.
Prints the counts and exits 1 when a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

REPO = Path(__file__).resolve().parent.parent
PIPELINE = """\
name: stress
params: {alpha: 0.1, batch: 1}
matrix:
  region: [us, br, de]
steps:
  fetch: {command: [sh, node.sh, "fetch.{region}", "{params.batch}/{params.alpha}", "0.5"]}
  train: {command: [sh, node.sh, "train.{region}", "{params.batch}/{params.alpha}", "1.0"], needs: [fetch]}
  report: {command: [sh, node.sh, report, "{params.batch}/{params.alpha}", "0.2"], needs: [train], over: [region]}
"""
# $1 node, $2 its params (every param is part of a node's identity, as the cache keys it), $3 seconds of work
# Its run: DAGFLOW_RUN_ID locally, the job ad's DagflowRunId on HTCondor.
NODE = """\
run=${DAGFLOW_RUN_ID:-$(sed -n 's/^DagflowRunId = "\\(.*\\)"$/\\1/p' "$_CONDOR_JOB_AD")}
exec 9>"lock.$1"
flock -n 9 || echo "conflict $1 $2 $$ $(date +%s.%N)" >> conflicts
echo "start $1 $2 $$ $run $(date +%s.%N)" >> events
sleep "$3"
echo "end $1 $2 $$ $run $(date +%s.%N)" >> events
"""
ONLY = [[], ["--only", "region=us"], ["--only", "region=br"], ["--only", "region=de"]]
ALPHAS = ["0.1", "0.2", "0.5", "1.0", "2.0"]
BATCHES = ["1", "2", "3"]


def command(pick: random.Random, last: list[str]) -> list[str]:
    """Half the time the same command again (the next cron firing, a user's retry); else a new mix of a
    part (--only), params (--set) or the plain pipeline."""
    if last and pick.random() < 0.5:
        return last
    sets = []
    if pick.random() < 0.7:
        sets += ["--set", f"alpha={pick.choice(ALPHAS)}"]
    if pick.random() < 0.3:
        sets += ["--set", f"batch={pick.choice(BATCHES)}"]
    return pick.choice(ONLY) + sets


def dagflow(workdir: Path, *args: str, engine: str = "local") -> subprocess.Popen[str]:
    return subprocess.Popen(
        _argv(engine, workdir, *args), cwd=workdir, env=_env(engine, workdir), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def dagflow_done(workdir: Path, *args: str, engine: str = "local") -> subprocess.CompletedProcess[str]:
    return subprocess.run(_argv(engine, workdir, *args), cwd=workdir, env=_env(engine, workdir),
                          capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip


def _argv(engine: str, workdir: Path, *args: str) -> list[str]:
    argv = [sys.executable, "-m", "dagflow", *args]
    if engine == "local":
        return [*argv, "--kill-grace", "0.5"] if args[0] == "run" and "--resume" not in args else argv
    argv += ["--engine", "condor", "--data-mode", "shared"] if args[0] == "run" else []
    if os.geteuid() != 0:
        return argv
    user = pwd.getpwnam(_pool("user"))  # HTCondor refuses root's jobs; setpriv execs, so SIGKILL hits dagflow
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", *argv]


def _env(engine: str, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    if engine == "condor":
        config = POOL_STATE / "condor_config"
        env.update(CONDOR_CONFIG=str(config), HOME=str(workdir),
                   PATH=f"{POOL_STATE / 'release' / 'htcondor' / 'bin'}:{Path(sys.executable).parent}:{env['PATH']}")
    return env


POOL_STATE = Path(os.environ.get("DAGFLOW_CONDOR_DIR", "/var/tmp/dagflow-condor"))


def _pool(what: str) -> str:
    """`scripts/condor-pool.sh user` (or another read-only query of the pool)."""
    script = REPO / "scripts" / "condor-pool.sh"
    return subprocess.run([str(script), what], capture_output=True, text=True, check=True).stdout.strip()


def queued_under(workdir: Path) -> int:
    """Jobs (DAGMan's and its nodes') of runs under workdir still in the pool's queue."""
    done = subprocess.run(
        ["condor_q", "-allusers", "-af", "Iwd"], env=_env("condor", workdir), capture_output=True, text=True,
        check=False, timeout=120,
    )  # fmt: skip
    return sum(1 for line in done.stdout.splitlines() if line.startswith(str(workdir)))


def identity(workdir: Path, node: str, params: str, run: str, plans: dict[str, dict]) -> tuple[str, str, str]:
    """A node as the cache keys it: name, params and its parents in its run's plan."""
    if run not in plans:
        try:
            nodes = json.loads((workdir / ".dagflow" / "runs" / run / "plan.json").read_text())["nodes"]
            plans[run] = {node["name"]: node for node in nodes}
        except (OSError, ValueError, KeyError, TypeError):
            plans[run] = {}
    parents = plans[run].get(node, {}).get("parents", [])
    return node, params, ",".join(sorted(parents))


class Rerun(NamedTuple):
    line: str
    pid: int
    earlier: frozenset[int]  # the pids that had ended the same node before


def reruns(workdir: Path, events: list[list[str]]) -> list[Rerun]:
    """Nodes started again after they once ended."""
    ended: dict[tuple[str, str, str], set[int]] = {}
    plans: dict[str, dict] = {}
    found = []
    for kind, node, params, pid, run, _ in events:
        key = identity(workdir, node, params, run, plans)
        if kind == "end":
            ended.setdefault(key, set()).add(int(pid))
        elif key in ended:
            found.append(Rerun(f"{node} ({params}) pid {pid} in {run}", int(pid), frozenset(ended[key])))
    return found


def journaled_successes(workdir: Path) -> dict[tuple[str, str], set[str]]:
    """(node, cache key) of a success -> the runs whose journal records it."""
    found: dict[tuple[str, str], set[str]] = {}
    for journal in (workdir / ".dagflow" / "runs").glob("*/journal.jsonl"):
        for line in journal.read_text().splitlines():
            event = json.loads(line) if line.startswith('{"e":"end"') else {}
            if event.get("s") == "succeeded" and event.get("k"):
                found.setdefault((event["n"], event["k"]), set()).add(journal.parent.name)
    return found


def rerun_keys(workdir: Path, pids: set[int]) -> dict[int, tuple[str, str, str | None]]:
    """pid of a rerun -> (its run, node, the cache key its run journaled for it)."""
    found: dict[int, tuple[str, str, str | None]] = {}
    for journal in (workdir / ".dagflow" / "runs").glob("*/journal.jsonl"):
        started: dict[str, int] = {}
        for line in journal.read_text().splitlines():
            event = json.loads(line)
            if event.get("e") == "start" and event.get("pid") in pids:
                started[event["n"]] = event["pid"]
                found[event["pid"]] = (journal.parent.name, event["n"], None)
            elif event.get("e") == "end" and event.get("n") in started:
                found[started[event["n"]]] = (journal.parent.name, event["n"], event.get("k"))
    return found


def read_events(workdir: Path) -> list[list[str]]:
    path = workdir / "events"
    return [line.split() for line in path.read_text().splitlines() if len(line.split()) == 6] if path.exists() else []


def unfinished_runs(workdir: Path) -> list[str]:
    root = workdir / ".dagflow" / "runs"
    found = []
    for run in sorted(root.iterdir()) if root.exists() else []:
        journal = run / "journal.jsonl"
        lines = journal.read_bytes().splitlines() if journal.exists() else []  # none: killed as it was made
        if (run / "plan.json").exists() and b'"e":"finish"' not in (lines or [b""])[-1]:
            found.append(run.name)
    return found


def outcome(proc: subprocess.Popen[str] | subprocess.CompletedProcess[str], err: str) -> str:
    if proc.returncode == 2 and "would run twice at once" in err:
        return "refused"
    if proc.returncode == 0:
        return "continued" if "continuing that run" in err else "ended"
    return f"exit {proc.returncode}"


def kill_at_random(proc: subprocess.Popen[str], pick: random.Random, given: argparse.Namespace, seen: int,
                   workdir: Path) -> bool:
    """Kill proc at a random moment (after the next node event with --mid-node); False: it ended first."""
    if given.mid_node:  # wait for the next node event (or the end), so that the kill falls among nodes
        while proc.poll() is None and len(read_events(workdir)) == seen:
            time.sleep(0.02)
    try:
        proc.wait(timeout=pick.uniform(0.0, given.max_delay))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True
    return False


def local_rounds(workdir: Path, pick: random.Random, given: argparse.Namespace, outcomes: Counter[str],
                 bad: list[str]) -> int:
    """Kills and re-runs on the local engine; returns the index of the first event of the closing runs."""
    started = time.monotonic()
    kills = 0
    args: list[str] = []
    while kills < given.kills:
        args = command(pick, args)
        seen = len(read_events(workdir))
        proc = dagflow(workdir, "run", "pipeline.yaml", *args)
        if kill_at_random(proc, pick, given, seen, workdir):
            kills += 1
            outcomes["killed"] += 1
            if kills % 25 == 0:
                shown = ", ".join(f"{count} {what}" for what, count in sorted(outcomes.items()))
                print(f"{kills} kills, {time.monotonic() - started:.0f} s: {shown}", flush=True)
            continue
        err = proc.stderr.read() if proc.stderr else ""
        outcomes[what := outcome(proc, err)] += 1
        if what.startswith("exit"):
            bad.append(f"{' '.join(args) or 'plain'}: {what}: {err.strip()[-300:]}")
    # What a user does last: continue what was cut short, newest first (an older run can share a node with a
    # newer one's unrecorded result, never the other way round: the newer one was checked against it).
    for run_id in reversed(unfinished_runs(workdir)):
        done = dagflow_done(workdir, "run", "--resume", run_id)
        if done.returncode != 0:
            bad.append(f"--resume {run_id}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    before = len(read_events(workdir))
    for args in ONLY:
        done = dagflow_done(workdir, "run", "pipeline.yaml", *args)
        if done.returncode != 0:
            bad.append(f"closing run {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()[-300:]}")
    return before


def condor_rounds(workdir: Path, pick: random.Random, given: argparse.Namespace, outcomes: Counter[str],
                  bad: list[str]) -> list[Rerun]:
    """Kills, each followed by the plain re-run, on the pool; returns the finished nodes rerun within a round."""
    started = time.monotonic()
    again: list[Rerun] = []
    args: list[str] = []
    for kill in range(1, given.kills + 1):
        while True:  # a command that ends before its kill is no kill: the round starts again
            args = command(pick, args)
            seen = len(read_events(workdir))
            proc = dagflow(workdir, "run", "pipeline.yaml", *args, engine="condor")
            if kill_at_random(proc, pick, given, seen, workdir):
                break
            err = proc.stderr.read() if proc.stderr else ""
            outcomes[f"uncut {what}" if (what := outcome(proc, err)) in ("ended", "refused") else what] += 1
            if what.startswith("exit"):
                bad.append(f"{' '.join(args) or 'plain'}: {what}: {err.strip()[-300:]}")
        outcomes["killed"] += 1
        rerun = dagflow_done(workdir, "run", "pipeline.yaml", engine="condor")
        outcomes[f"re-run {(what := outcome(rerun, rerun.stderr))}"] += 1
        if what.startswith("exit"):
            bad.append(f"re-run after kill {kill}: {what}: {rerun.stderr.strip()[-300:]}")
        while queued_under(workdir):
            time.sleep(2)
        again += reruns(workdir, read_events(workdir)[seen:])
        shown = ", ".join(f"{count} {what}" for what, count in sorted(outcomes.items()))
        print(f"{kill} kills, {time.monotonic() - started:.0f} s: {shown}", flush=True)
    return again


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--kills", type=int, default=500)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--engine", choices=["local", "condor"], default="local")
    parser.add_argument("--dir", type=Path, default=None, help="work here (default: a new temporary directory)")
    parser.add_argument("--max-delay", type=float, default=None,
                        help="latest kill, seconds after the start (default 4; 60 on condor)")
    parser.add_argument("--mid-node", action="store_true",
                        help="kill a random moment after the next node event (a start or an end)")
    given = parser.parse_args()
    given.max_delay = given.max_delay or (60.0 if given.engine == "condor" else 4.0)
    seed = given.seed if given.seed is not None else time.time_ns() % 2**32
    pick = random.Random(seed)
    where = POOL_STATE / "work" if given.engine == "condor" else None  # a directory the pool's user can reach
    workdir = given.dir or Path(tempfile.mkdtemp(prefix="kill-stress-", dir=where))
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "pipeline.yaml").write_text(PIPELINE)
    (workdir / "node.sh").write_text(NODE)
    if given.engine == "condor" and os.geteuid() == 0:
        subprocess.run(["chown", "-R", _pool("user"), str(workdir)], check=True)
        os.chmod(workdir, 0o755)
    outcomes: Counter[str] = Counter()
    bad: list[str] = []
    started = time.monotonic()
    if given.engine == "condor":
        again, before = condor_rounds(workdir, pick, given, outcomes, bad), None
    else:
        before = local_rounds(workdir, pick, given, outcomes, bad)
        again = reruns(workdir, read_events(workdir))
    events = read_events(workdir)
    conflicts = (workdir / "conflicts").read_text().splitlines() if (workdir / "conflicts").exists() else []
    # A rerun whose key an earlier run journaled as a success: journaled but never written to the cache index
    # (#40 item 7: the runner killed between the two), not two live runs. One whose key differs from the keys
    # its earlier ends were journaled with is other work to the cache (a parent's key differs), shown apart.
    successes = journaled_successes(workdir)
    keys = rerun_keys(workdir, {rerun.pid for rerun in again} | {pid for rerun in again for pid in rerun.earlier})
    uncached, other_key = [], []
    for rerun in again:
        run, node, key = keys.get(rerun.pid, ("", "", None))
        earlier = {keys.get(pid, ("", "", None))[2] for pid in rerun.earlier}
        if key is not None and successes.get((node, key), set()) - {run}:
            uncached.append(rerun)
        elif key is not None and None not in earlier and key not in earlier:
            other_key.append(rerun)
    print(f"seed {seed}, {outcomes['killed']} kills on {given.engine} in {time.monotonic() - started:.0f} s, "
          f"in {workdir}")
    print("commands: " + ", ".join(f"{count} {what}" for what, count in sorted(outcomes.items())))
    print(f"node starts: {sum(1 for event in events if event[0] == 'start')}, ends: "
          f"{sum(1 for event in events if event[0] == 'end')}")
    closing = "" if before is None else (
        f"; nodes the closing runs started: {sum(1 for event in events[before:] if event[0] == 'start')}"
    )
    print(f"twice at once: {len(conflicts)}; finished nodes rerun: {len(again)}, of which {len(uncached)} were "
          f"journaled successes missing from the cache index (item 7) and {len(other_key)} ran under another "
          f"cache key{closing}")
    for line in conflicts[:10] + [rerun.line for rerun in again[:10]] + bad[:10]:
        print("  " + line)
    return 1 if conflicts or set(again) - set(uncached) - set(other_key) or bad else 0


if __name__ == "__main__":
    sys.exit(main())
