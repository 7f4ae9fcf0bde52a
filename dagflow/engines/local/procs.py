"""Processes: the keeper that starts and waits for nodes, finding nodes again after a runner died, and
killing process groups.

The runner does not start nodes itself: it asks its keeper (keeper.py), a small process in its own
process group that is the parent of every node, starts each in a new process group (its group id is
its pid) with posix_spawn in the keeper's working directory (the plan's workdir, which the keeper moves
into as it starts: posix_spawn cannot change directory, and the runner's own stays where it was), its
stdout and stderr going to the node's log files, and records each node's start and exit in
`procs.jsonl` in the run directory. A process group, not a session:
setsid(2) costs about 2 ms more per spawn on Linux with scheduler autogroups (each session gets its
own), and a group is all that killing a node's process tree needs. Ctrl-C in a terminal reaches only
the foreground group (the runner's), which then stops the nodes itself.

If the runner itself is killed (SIGKILL, OOM, a crash), the keeper and the nodes run on: a node's
output goes to its files, and its exit is recorded by the keeper. The next runner on that run
(`--resume`) reads `procs.jsonl` (`read_procs`) and, for each node the journal does not show finished:
takes the recorded result of one that exited meanwhile; adopts one still running (it is an unreaped
child of a live keeper process of the run: `held_by_keeper`), waiting for it with a pidfd and reading
its exit from the keeper's record; and kills and reruns only a node whose exit can never be known (the
keeper and its warden both died, or the run was written by a dagflow from before the keeper).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from dagflow.data import with_import_root
from dagflow.engines.local.keeper import WORKDIR_FD, lock_name
from dagflow.plan import DAGFLOW_LAUNCHER
from dagflow.run.lock import is_locked


def command_for(argv: list[str], env: dict[str, str]) -> list[str]:
    """A node running dagflow itself uses this interpreter, and can import this dagflow."""
    if argv and argv[0] == DAGFLOW_LAUNCHER:
        env["PYTHONPATH"] = with_import_root(env.get("PYTHONPATH"))
        return [sys.executable, "-m", "dagflow", *argv[1:]]
    return argv


def with_interpreter_on_path(path: str) -> str:
    """PATH with this interpreter's directory first, as if its virtual environment were activated:
    a node's `python` is then the one running dagflow, with the same packages installed."""
    bindir = str(Path(sys.executable).parent)
    parts = path.split(os.pathsep) if path else []
    return path if parts[:1] == [bindir] else os.pathsep.join([bindir, *parts])


@dataclass(slots=True)
class ProcEntry:
    """A node's latest process, as its keeper recorded it."""

    attempt: int
    pid: int
    keeper: int | None
    rc: int | None = None  # None: no exit recorded (still running, or its keeper died first)
    # (wall s, cpu s, max rss KB, unix end time) from the exit record; None before dagflow measured nodes
    usage: tuple[float, float, int, float] | None = None


def read_procs(path: Path) -> dict[str, ProcEntry]:
    """Each node's latest process in a keeper's `procs.jsonl`; malformed (torn) lines are skipped."""
    entries: dict[str, ProcEntry] = {}
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return entries
    for line in data.split(b"\n"):
        try:
            event = json.loads(line)
            name, attempt, pid = event["n"], event["a"], event["pid"]
        except (ValueError, KeyError, TypeError):
            continue
        if not (isinstance(name, str) and type(attempt) is int and type(pid) is int):
            continue
        rc = event.get("rc")
        if type(rc) is int:
            entry = entries.get(name)
            if entry is not None and entry.pid == pid:
                entry.rc = rc
                entry.usage = _recorded_usage(event)
        elif "rc" not in event:
            keeper = event.get("k")
            entries[name] = ProcEntry(attempt, pid, keeper if type(keeper) is int else None)
    return entries


def _recorded_usage(event: dict) -> tuple[float, float, int, float] | None:
    wall, cpu, maxrss, ended = event.get("w"), event.get("c"), event.get("m"), event.get("t")
    if not (type(maxrss) is int and all(type(value) in (int, float) for value in (wall, cpu, ended))):
        return None
    return float(wall), float(cpu), maxrss, float(ended)


def start_keeper(run_dir: Path, workdir: str, env: dict[str, str]) -> tuple[Child, int, int]:
    """Start a keeper for run_dir in its own process group, running nodes in workdir: (its process,
    request fd, reply fd). A workdir that cannot be opened raises here."""
    _stop_passing_on_inherited_descriptors()
    request_r, request_w = os.pipe()
    reply_r, reply_w = os.pipe()
    argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("keeper.py")), str(run_dir)]
    try:
        # Opened after the pipes, so it is none of the descriptors 0 to WORKDIR_FD that the keeper gets.
        directory = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        actions = [
            (os.POSIX_SPAWN_DUP2, request_r, 0),
            (os.POSIX_SPAWN_DUP2, reply_w, 1),
            (os.POSIX_SPAWN_DUP2, directory, WORKDIR_FD),
        ]
        try:
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setpgroup=0, setsigdef=_DEFAULT_SIGNALS)
        finally:
            os.close(directory)
    except OSError:
        os.close(request_w)
        os.close(reply_r)
        raise
    finally:
        os.close(request_r)
        os.close(reply_w)
    os.set_blocking(reply_r, False)
    return Child(pid), request_w, reply_r


def _stop_passing_on_inherited_descriptors() -> None:
    """Descriptors this process inherited (a crontab line's `flock` lock, above all) are not passed on to
    the keeper and its nodes: the lock must end with the runner that took it. Held by a node it would
    outlive a killed runner, and held by a daemon a node left behind, it would skip every later firing."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # no /proc: nothing to look at
        return
    for name in names:
        fd = int(name)
        if fd > 2:
            with contextlib.suppress(OSError):  # the directory's own descriptor, closed by now
                os.set_inheritable(fd, False)


def is_keeper(pid: int | None, run_dir: Path) -> bool:
    """Whether pid is a live keeper of the run in run_dir (by its command line)."""
    if not pid:
        return False
    cmdline = _read_proc(pid, "cmdline")
    if not cmdline:
        return False
    args = [arg for arg in cmdline.split(b"\0") if arg]
    # dagflow-keeper: the native keeper of earlier installs, whose runs a resume may still find running.
    if len(args) < 2 or not args[-2].endswith((b"keeper.py", b"dagflow-keeper")):
        return False
    return os.path.realpath(args[-1]) == os.path.realpath(os.fsencode(str(run_dir)))


def node_alive(pid: int, run_id: str, node: str) -> bool:
    return _is_node_process(pid, run_id, node)


def keeper_alive(pid: int | None, run_dir: Path) -> bool:
    """Whether keeper pid of the run in run_dir, or its warden, still lives: whether anything will still
    record how its nodes end. Both hold its lock file (keeper.py); the pid alone could be reused."""
    if not pid:
        return False
    lock = run_dir / lock_name(pid)
    if not lock.exists():  # not created yet, or removed as its warden ended (or a keeper of an earlier install)
        return is_keeper(pid, run_dir)
    return is_locked(lock)  # gone since: its warden ended


def held_by_keeper(pid: int, run_dir: Path) -> bool:
    """Whether pid is a child of a live keeper process of run_dir (the keeper, or the warden that took
    its nodes over), not reaped yet: proof the node is that keeper's, whatever its environment became
    (`env -i`), since its pid cannot be reused until that process reaps it and records its exit."""
    fields = _read_stat(pid)
    return fields is not None and len(fields) > 1 and fields[1].isdigit() and is_keeper(int(fields[1]), run_dir)


class Child:
    """A started node process. Reaped with waitpid(pid) only, never a wait for any child, so the
    runner can live inside a program that has children of its own."""

    __slots__ = ("pid",)

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def poll(self) -> int | None:
        """Its exit code (negative: the signal that killed it), or None while it runs."""
        pid, status = os.waitpid(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        return os.waitstatus_to_exitcode(status)


# Python ignores SIGPIPE and SIGXFSZ for itself; the keeper gets the defaults back, as Popen gives them.
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ)


_resolved: dict[tuple[str, str, str], str] = {}


def resolve_program(name: str, path: str, workdir: str) -> str:
    """name looked up in the node's PATH (posix_spawnp would search the runner's own PATH), whose
    relative entries are relative to the workdir, where the keeper starts nodes.

    Only successful lookups are cached: a program an earlier node installs must still be found.
    """
    if os.sep in name:
        return name
    key = (name, path, workdir)
    found = _resolved.get(key)
    if found is None:
        # os.path.join leaves an absolute entry as it is; an empty one (the current directory) is the workdir.
        search = os.pathsep.join(os.path.join(workdir, entry) for entry in path.split(os.pathsep))
        found = shutil.which(name, path=search)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
    _resolved[key] = found
    return found


def _read_proc(pid: int, name: str) -> bytes | None:
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _read_stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (after the parenthesised command name, which may hold spaces)."""
    data = _read_proc(pid, "stat")
    return data[data.rfind(b")") + 2 :].decode().split() if data else None


def kill_group(pgid: int, sig: int) -> bool:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _is_node_process(pid: int, run_id: str, node: str) -> bool:
    """Whether pid is a live (not zombie) process of that run's node, by its environment."""
    env = dagflow_environment(pid)
    return env is not None and env.get("DAGFLOW_RUN_ID") == run_id and env.get("DAGFLOW_NODE") == node


def dagflow_environment(pid: int) -> dict[str, str] | None:
    """The DAGFLOW_* variables pid started with; None if it is gone, a zombie (its environment is
    unreadable) or not ours to read."""
    environ = _read_proc(pid, "environ")
    if not environ:
        return None
    pairs = (variable.partition(b"=") for variable in environ.split(b"\0") if variable.startswith(b"DAGFLOW_"))
    return {os.fsdecode(key): os.fsdecode(value) for key, _, value in pairs}


def kill_orphans(orphans: Iterable[tuple[int, str]], run_id: str, grace_s: float) -> int:
    """Kill the process groups of (pid, node) nodes a dead runner of run_id left; return how many lived.

    A pid that no longer exists may still name a process group whose leader exited (Linux keeps a pid
    reserved while it is some group's id), so that group gets SIGKILL; a pid now used by a different
    process (one without that run's and node's DAGFLOW_RUN_ID and DAGFLOW_NODE) means the group is
    gone, and is left alone.
    """
    live = []
    for pid, node in orphans:
        if _is_node_process(pid, run_id, node):
            kill_group(pid, signal.SIGTERM)
            live.append((pid, node))
        elif _read_stat(pid) is None:
            kill_group(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    waiting = list(live)
    while waiting and time.monotonic() < deadline:
        time.sleep(0.05)
        waiting = [(pid, node) for pid, node in waiting if _is_node_process(pid, run_id, node)]
    for pid, _ in live:
        kill_group(pid, signal.SIGKILL)
    return len(live)
